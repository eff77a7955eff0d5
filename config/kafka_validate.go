package config

import (
	"slices"
	"strings"
)

// kafkaSASLMechanisms are the SASL mechanisms the Kafka listener can
// offer.
var kafkaSASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// validateKafkaSASL checks kafka.sasl_mechanisms: known mechanisms, each
// once, only with TLS (credentials are not sent in the clear, and a broker
// without TLS authenticates no one), and PLAIN only with a tokens file
// (its passwords are tokens).
func (b Broker) validateKafkaSASL() error {
	const key = "kafka.sasl_mechanisms"
	mechs := b.Kafka.SASLMechanisms
	allowed := strings.Join(kafkaSASLMechanisms, ", ")
	for i, m := range mechs {
		if !slices.Contains(kafkaSASLMechanisms, m) || slices.Contains(mechs[:i], m) {
			return &Error{Key: key, Value: m, Allowed: "each once of " + allowed}
		}
	}
	if len(mechs) == 0 {
		return nil
	}
	if !b.Security.Enabled() {
		return &Error{Key: key, Value: strings.Join(mechs, ","), Allowed: "empty without TLS",
			Reason: "a broker without TLS authenticates no one, and passwords would cross the network in the clear; set security.tls.*"}
	}
	if slices.Contains(mechs, "PLAIN") && b.Security.TokensFile == "" {
		return &Error{Key: key, Value: "PLAIN", Allowed: "PLAIN only with security.tokens_file",
			Reason: "a PLAIN password is a token of security.tokens_file"}
	}
	return nil
}
