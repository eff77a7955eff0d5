package kafka

// The APIs served, by key, with the versions served: what ApiVersions
// advertises, and all that conn.go dispatches. A key or version not here
// closes the connection (ApiVersions aside).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type api struct {
	min, max int16
	// handle answers req (nil for no answer); an error closes the
	// connection.
	handle func(ctx context.Context, c *conn, req kmsg.Request) (kmsg.Response, error)
}

const apiVersionsKey = 18

var apis map[int16]api

func init() {
	// Filled here, not in the declaration: ApiVersions reads the table.
	apis = map[int16]api{
		0:              {0, 12, handleProduce},        // 00_produce.go
		1:              {4, 17, handleFetch},          // 01_fetch.go
		2:              {1, 10, handleListOffsets},    // 02_list_offsets.go
		3:              {0, 13, handleMetadata},       // 03_metadata.go
		apiVersionsKey: {0, 4, handleApiVersions},     // 18_api_versions.go
		10:             {0, 6, handleFindCoordinator}, // 10_find_coordinator.go
		11:             {0, 9, handleJoinGroup},       // 11_join_group.go
		12:             {0, 4, handleHeartbeat},       // 12_heartbeat.go
		13:             {0, 5, handleLeaveGroup},      // 13_leave_group.go
		14:             {0, 5, handleSyncGroup},       // 14_sync_group.go
		22:             {0, 5, handleInitProducerID},  // 22_init_producer_id.go

		// Leader epochs (KIP-320).
		23: {2, 4, handleOffsetForLeaderEpoch}, // 23_offset_for_leader_epoch.go

		// Consumer groups (KIP-848) and their offsets.
		8:  {2, 10, handleOffsetCommit},          // 08_offset_commit.go
		9:  {1, 10, handleOffsetFetch},           // 09_offset_fetch.go
		15: {0, 6, handleDescribeGroups},         // 15_describe_groups.go
		16: {0, 5, handleListGroups},             // 16_list_groups.go
		42: {0, 2, handleDeleteGroups},           // 42_delete_groups.go
		47: {0, 0, handleOffsetDelete},           // 47_offset_delete.go
		68: {0, 1, handleConsumerGroupHeartbeat}, // 68_consumer_group_heartbeat.go
		69: {0, 1, handleConsumerGroupDescribe},  // 69_consumer_group_describe.go

		// Authentication (SASL) and SCRAM credentials.
		17: {0, 1, handleSaslHandshake}, // 17_sasl_handshake.go
		36: {0, 2, handleSASLAuth},      // 36_sasl_authenticate.go
		50: {0, 0, handleDescribeSCRAM}, // 50_describe_user_scram_credentials.go
		51: {0, 0, handleAlterSCRAM},    // 51_alter_user_scram_credentials.go

		// Admin.
		19: {2, 7, handleCreateTopics},            // 19_create_topics.go
		20: {1, 6, handleDeleteTopics},            // 20_delete_topics.go
		32: {1, 4, handleDescribeConfigs},         // 32_describe_configs.go
		33: {0, 2, handleAlterConfigs},            // 33_alter_configs.go
		37: {0, 3, handleCreatePartitions},        // 37_create_partitions.go
		29: {1, 3, handleDescribeACLs},            // 29_describe_acls.go
		30: {1, 3, handleCreateACLs},              // 30_create_acls.go
		31: {1, 3, handleDeleteACLs},              // 31_delete_acls.go
		35: {1, 4, handleDescribeLogDirs},         // 35_describe_log_dirs.go
		44: {0, 1, handleIncrementalAlterConfigs}, // 44_incremental_alter_configs.go
		60: {0, 2, handleDescribeCluster},         // 60_describe_cluster.go
		61: {0, 0, handleDescribeProducers},       // 61_describe_producers.go
	}
}
