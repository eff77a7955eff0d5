package main

// strata topic configs, the settings list in topic describe --help, and the
// JSON documents of topic list and describe (docs/CLI.md).

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/config"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

func newTopicConfigsCommand() *cobra.Command {
	var format outputFlag
	cmd := &cobra.Command{
		Use:   "configs",
		Short: "List every topic setting with its description, accepted values and default",
		Long: `List every per-topic setting Strata knows: its name, what it does, the
values it accepts and its built-in default. A broker's topic_defaults (in
its config file) may change a default for the topics it creates; "strata
topic describe NAME" shows the values a topic has in force.

Set them with "strata topic create NAME --config key=value" or change them
with "strata topic alter NAME --set key=value". Nothing is asked of a broker.`,
		Example: `  strata topic configs
  strata topic configs --format json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := format.check(); err != nil {
				return err
			}
			if format == outputJSON {
				return writeJSON(cmd.OutOrStdout(), topicConfigsJSON())
			}
			_, err := io.WriteString(cmd.OutOrStdout(), topicSettingsText())
			return err
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}

// topicSettingsText is every topic setting, for topic configs and the help
// of topic describe: the name and default, then what it does and the
// values it takes, indented.
func topicSettingsText() string {
	var sb strings.Builder
	for _, k := range config.TopicKeys() {
		def := k.Default
		if human := k.Display(def); human != def {
			def = human + " (" + def + ")"
		}
		fmt.Fprintf(&sb, "  %s, default %s\n", k.Name, def)
		for _, line := range wrapWords(k.Doc+" Values: "+k.Allowed+".", 70) {
			fmt.Fprintf(&sb, "      %s\n", line)
		}
	}
	return sb.String()
}

// wrapWords breaks text into lines of at most width bytes, between words
// (a longer word gets a line of its own).
func wrapWords(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// topicConfigDoc is one setting in topic configs --format json.
type topicConfigDoc struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Default     string `json:"default"`
	Allowed     string `json:"allowed"`
	Description string `json:"description"`
}

func topicConfigsJSON() []topicConfigDoc {
	out := []topicConfigDoc{}
	for _, k := range config.TopicKeys() {
		out = append(out, topicConfigDoc{Name: k.Name, Type: k.Type, Default: k.Default, Allowed: k.Allowed, Description: k.Doc})
	}
	return out
}

// topicListDoc is one topic in topic list --format json.
type topicListDoc struct {
	Name              string `json:"name"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int32  `json:"replication_factor"`
}

func topicListJSON(topics []*stratav1.TopicSummary) []topicListDoc {
	out := []topicListDoc{}
	for _, t := range topics {
		out = append(out, topicListDoc{Name: t.GetName(), Partitions: t.GetPartitions(), ReplicationFactor: t.GetReplicationFactor()})
	}
	return out
}

// The document of topic describe --format json.
type (
	topicDoc struct {
		Name string `json:"name"`
		ID   string `json:"id"`
		// Config is every setting in force; Overrides those the topic
		// sets rather than inheriting.
		Config     map[string]string   `json:"config"`
		Overrides  map[string]string   `json:"overrides"`
		Partitions []topicPartitionDoc `json:"partitions"`
	}
	topicPartitionDoc struct {
		Partition   int32   `json:"partition"`
		Leader      int32   `json:"leader"`
		LeaderEpoch int32   `json:"leader_epoch"`
		Replicas    []int32 `json:"replicas"`
		ISR         []int32 `json:"isr"`
		// ColdLoading: the broker has not read the cold tier yet, and the
		// figures that depend on it are the local log's alone.
		ColdLoading       bool   `json:"cold_loading"`
		LogStartOffset    int64  `json:"log_start_offset"`
		HighWatermark     int64  `json:"high_watermark"`
		LogEndOffset      int64  `json:"log_end_offset"`
		LocalStartOffset  int64  `json:"local_start_offset"`
		LocalBytes        int64  `json:"local_bytes"`
		LocalSegments     int32  `json:"local_segments"`
		ColdBytes         int64  `json:"cold_bytes"`
		ColdSegments      int32  `json:"cold_segments"`
		ColdEndOffset     int64  `json:"cold_end_offset"`
		UploadLagBytes    int64  `json:"upload_lag_bytes"`
		UploadLagSegments int32  `json:"upload_lag_segments"`
		UploadLagMs       int64  `json:"upload_lag_ms"`
		HeadGeneration    uint64 `json:"head_generation"`
		HeadAgeMs         int64  `json:"head_age_ms"`
		TieringError      string `json:"tiering_error"`
	}
)

func topicJSON(d *stratav1.TopicDescription) topicDoc {
	doc := topicDoc{Name: d.GetName(), ID: d.GetId(), Config: map[string]string{}, Overrides: map[string]string{}, Partitions: []topicPartitionDoc{}}
	for k, v := range d.GetConfig() {
		doc.Config[k] = v
	}
	for k, v := range d.GetOverrides() {
		doc.Overrides[k] = v
	}
	parts := slices.Clone(d.GetPartitions())
	sort.Slice(parts, func(i, j int) bool {
		return parts[i].GetMetadata().GetPartition() < parts[j].GetMetadata().GetPartition()
	})
	for _, p := range parts {
		m := p.GetMetadata()
		doc.Partitions = append(doc.Partitions, topicPartitionDoc{
			Partition: m.GetPartition(), Leader: m.GetLeader(), LeaderEpoch: m.GetLeaderEpoch(),
			Replicas: orEmpty(m.GetReplicas()), ISR: orEmpty(m.GetIsr()), ColdLoading: p.GetColdLoading(),
			LogStartOffset: p.GetLogStartOffset(), HighWatermark: p.GetHighWatermark(), LogEndOffset: p.GetLogEndOffset(),
			LocalStartOffset: p.GetLocalStartOffset(), LocalBytes: p.GetLocalBytes(), LocalSegments: p.GetLocalSegments(),
			ColdBytes: p.GetColdBytes(), ColdSegments: p.GetColdSegments(), ColdEndOffset: p.GetColdEndOffset(),
			UploadLagBytes: p.GetUploadLagBytes(), UploadLagSegments: p.GetUploadLagSegments(), UploadLagMs: p.GetUploadLagMs(),
			HeadGeneration: p.GetHeadGeneration(), HeadAgeMs: p.GetHeadAgeMs(), TieringError: p.GetTieringError(),
		})
	}
	return doc
}
