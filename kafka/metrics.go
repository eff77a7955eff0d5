package kafka

// Metrics: every request answered is counted in the broker's Kafka
// metrics (broker/metrics_kafka.go) by API name and version, with its
// latency (from the decoded request to the answer ready to write, a
// fetch's wait included) and the Kafka error codes its answer carries,
// one per failed partition, group or top-level error, as Kafka's own
// ErrorsPerSec counts them. A request answered by closing the connection
// (an acks=0 produce refused, a handler's error) counts as
// CONNECTION_CLOSED. Requests that do not decode, or name an API or
// version not served, close the connection before they are counted, so
// the labels stay within apis.go.

import (
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const connectionClosed = "CONNECTION_CLOSED"

// record counts one request served.
func (s *Server) record(rq request, resp kmsg.Response, err error, d time.Duration) {
	var errs []string
	switch {
	case err != nil:
		errs = []string{connectionClosed}
	case resp != nil:
		errs = errorNames(reflect.ValueOf(resp), nil)
	}
	s.b.KafkaMetrics().Request(kmsg.NameForKey(rq.key), rq.version, d, errs)
}

// errorNames appends the names of the non-zero ErrorCode fields in v, a
// response or a part of one, walking its structs and slices. Every kmsg
// response names its error codes ErrorCode, at the top and in each
// partition, topic or group, so one walk serves every API.
func errorNames(v reflect.Value, out []string) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			out = errorNames(v.Elem(), out)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return out // bytes: record batches, ids
		}
		for i := range v.Len() {
			out = errorNames(v.Index(i), out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			f := t.Field(i)
			switch {
			case !f.IsExported():
			case f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16:
				if code := int16(v.Field(i).Int()); code != 0 {
					out = append(out, errorName(code))
				}
			default:
				out = errorNames(v.Field(i), out)
			}
		}
	}
	return out
}

// errorName is Kafka's name for code, or UNKNOWN_SERVER_ERROR for a code
// not in Kafka's list (so the label stays bounded).
func errorName(code int16) string {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return kerr.UnknownServerError.Message
}
