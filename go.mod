module github.com/strata-log/strata

go 1.26.0

require (
	github.com/klauspost/compress v1.20.4
	github.com/pierrec/lz4/v4 v4.1.33
	github.com/spf13/pflag v1.0.9
	go.yaml.in/yaml/v3 v3.0.6
)
