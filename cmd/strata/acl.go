package main

// strata acl: add, list and remove the ACLs stored in the cluster.

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/security"
)

func init() { clientCommands = append(clientCommands, newACLCommand) }

func newACLCommand() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Add, list and remove ACLs",
		Long: `Manage the ACLs stored in the cluster. An ACL allows one principal one
operation on a resource; whatever no ACL allows is denied. ACLs take effect
on brokers that authorize requests.

A principal is User:NAME (the common name of a client certificate, or the
name a token stands for), or '*' for every authenticated principal (never an
anonymous caller). A resource is a topic or a consumer group, named whole or
by prefix, or the cluster itself. Operations:

  read   on a topic: fetch and list offsets; on a group: join it, commit
         and fetch its offsets, describe it, reset it while it is empty
  write  on a topic: produce
  admin  on a topic: create, delete, alter, restore (and read and write);
         on a group: delete it, reset it by force (and read);
         on the cluster: manage ACLs (the only operation on the cluster)`,
		Example: `  strata acl add --principal User:alice --topic orders --operation read
  strata acl add --principal User:alice --group billing -o read
  strata acl add --principal User:ingest --topic logs. --prefix -o write
  strata acl add --principal User:ops --cluster -o admin
  strata acl list --principal User:alice
  strata acl remove --principal User:alice --topic orders -o read`,
	}
	cmd.RunE = groupRun
	f.register(cmd)
	cmd.AddCommand(newACLAddCommand(&f), newACLListCommand(&f), newACLRemoveCommand(&f))
	return cmd
}

// aclFlags are the flags that name one ACL, shared by add and remove.
type aclFlags struct {
	principal, topic, group, operation string
	cluster, prefix                    bool
}

func (a *aclFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&a.principal, "principal", "", "who the ACL is for: User:NAME, or '*' for every authenticated principal")
	fs.StringVar(&a.topic, "topic", "", "the ACL is on this topic (a prefix of topic names with --prefix)")
	fs.StringVar(&a.group, "group", "", "the ACL is on this consumer group (a prefix of group names with --prefix)")
	fs.BoolVar(&a.cluster, "cluster", false, "the ACL is on the cluster itself (operation admin: manage ACLs)")
	fs.BoolVar(&a.prefix, "prefix", false, "the --topic or --group name is a prefix: the ACL covers every name that starts with it (\"\" for all)")
	fs.StringVarP(&a.operation, "operation", "o", "", "what the ACL allows: read, write or admin")
}

// acl builds the ACL the flags name and checks it here, so a mistake is
// explained in terms of flags before anything is sent.
func (a *aclFlags) acl(cmd *cobra.Command) (security.ACL, error) {
	if a.principal == "" {
		return security.ACL{}, usageErrorf("--principal is required: User:NAME, or '*' for every authenticated principal")
	}
	var given []string
	acl := security.ACL{Principal: a.principal, Prefix: a.prefix, Op: security.Operation(strings.ToLower(a.operation))}
	// Changed, not a non-empty value: --topic "" --prefix is every topic.
	if cmd.Flags().Changed("topic") {
		given = append(given, "--topic")
		acl.Resource, acl.Name = security.ResourceTopic, a.topic
	}
	if cmd.Flags().Changed("group") {
		given = append(given, "--group")
		acl.Resource, acl.Name = security.ResourceGroup, a.group
	}
	if a.cluster {
		given = append(given, "--cluster")
		acl.Resource, acl.Name = security.ResourceCluster, ""
	}
	switch {
	case len(given) == 0:
		return security.ACL{}, usageErrorf("name the resource: give one of --topic NAME, --group NAME or --cluster")
	case len(given) > 1:
		return security.ACL{}, usageErrorf("give only one of --topic, --group and --cluster, not %s", strings.Join(given, " and "))
	case a.cluster && a.prefix:
		return security.ACL{}, usageErrorf("--prefix applies to --topic and --group; the cluster has no name")
	case !a.cluster && acl.Name == "" && !a.prefix:
		return security.ACL{}, usageErrorf("%s needs a name; for every one, give --prefix with an empty name (%s \"\" --prefix)", given[0], given[0])
	case a.operation == "":
		return security.ACL{}, usageErrorf("--operation (-o) is required: read, write or admin")
	}
	if err := acl.Validate(); err != nil {
		return security.ACL{}, usageErrorf("invalid ACL: %s", strings.TrimPrefix(err.Error(), "security: "))
	}
	return acl, nil
}

func newACLAddCommand(f *clientFlags) *cobra.Command {
	var a aclFlags
	cmd := &cobra.Command{
		Use:   "add --principal P (--topic NAME | --group NAME | --cluster) [--prefix] -o OP",
		Short: "Allow a principal an operation on a resource",
		Long: `Store an ACL in the cluster. Adding an ACL that is stored already changes
nothing, so the command is safe to repeat.`,
		Example: `  strata acl add --principal User:alice --topic orders -o read
  strata acl add --principal User:alice --topic orders -o write
  strata acl add --principal '*' --topic public. --prefix -o read
  strata acl add --principal User:etl --group "" --prefix -o read
  strata acl add --principal User:ops --cluster -o admin`,
		Args: exactArgs(),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			acl, err := a.acl(cmd)
			if err != nil {
				return err
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				if err := c.CreateACLs(ctx, toProtoACL(acl)); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "added ACL %s\n", acl)
				return nil
			})
		}),
	}
	a.register(cmd)
	return cmd
}

func newACLRemoveCommand(f *clientFlags) *cobra.Command {
	var a aclFlags
	cmd := &cobra.Command{
		Use:   "remove --principal P (--topic NAME | --group NAME | --cluster) [--prefix] -o OP",
		Short: "Remove an ACL",
		Long: `Remove the stored ACL the flags name. It must match exactly: a prefix ACL
is removed with --prefix, a whole-name one without. Removing an ACL that is
not stored is not an error; the command says that nothing matched.`,
		Example: `  strata acl remove --principal User:alice --topic orders -o read
  strata acl remove --principal '*' --topic public. --prefix -o read`,
		Args: exactArgs(),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			acl, err := a.acl(cmd)
			if err != nil {
				return err
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				n, err := c.DeleteACLs(ctx, toProtoACL(acl))
				if err != nil {
					return err
				}
				if n == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "no stored ACL matched %s; nothing removed\n", acl)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "removed ACL %s\n", acl)
				}
				return nil
			})
		}),
	}
	a.register(cmd)
	return cmd
}

func newACLListCommand(f *clientFlags) *cobra.Command {
	var principal string
	var format outputFlag
	cmd := &cobra.Command{
		Use:   "list [--principal P]",
		Short: "List the stored ACLs",
		Long: `List the stored ACLs, one per line, in the order they were added: the
principal, the operation, the kind of resource, its name ("-" for the
cluster, "(any)" for an empty prefix, which covers every name) and whether
the name is a literal name or a prefix. --principal shows only the ACLs of
that exact principal ('*' shows those granted to every principal).
--format json writes one JSON array instead (docs/CLI.md).`,
		Example: `  strata acl list
  strata acl list --principal User:alice`,
		Args: exactArgs(),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			if err := format.check(); err != nil {
				return err
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				acls, err := c.ListACLs(ctx, principal)
				if err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), aclJSON(acls))
				}
				return printACLs(cmd.OutOrStdout(), acls)
			})
		}),
	}
	cmd.Flags().StringVar(&principal, "principal", "", "only the ACLs of this principal (User:NAME or '*')")
	addOutputFlag(cmd, &format)
	return cmd
}

// aclDoc is one ACL in acl list --format json: name is "" for the cluster
// resource and, with prefix true, for a prefix covering every name.
type aclDoc struct {
	Principal    string `json:"principal"`
	Operation    string `json:"operation"`
	ResourceType string `json:"resource_type"`
	Name         string `json:"name"`
	Prefix       bool   `json:"prefix"`
}

func aclJSON(acls []*stratav1.ACL) []aclDoc {
	out := []aclDoc{}
	for _, a := range acls {
		out = append(out, aclDoc{Principal: a.GetPrincipal(), Operation: a.GetOperation(), ResourceType: a.GetResourceType(), Name: a.GetName(), Prefix: a.GetPrefix()})
	}
	return out
}

// printACLs writes one ACL per row, in the order given.
func printACLs(w io.Writer, acls []*stratav1.ACL) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "PRINCIPAL\tOPERATION\tRESOURCE\tNAME\tPATTERN")
	for _, a := range acls {
		name, pattern := a.GetName(), "literal"
		if a.GetPrefix() {
			pattern = "prefix"
		}
		switch {
		case a.GetResourceType() == string(security.ResourceCluster):
			name, pattern = "-", "-"
		case name == "" && a.GetPrefix():
			name = "(any)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.GetPrincipal(), a.GetOperation(), a.GetResourceType(), name, pattern)
	}
	return tw.Flush()
}

func toProtoACL(a security.ACL) *stratav1.ACL {
	return &stratav1.ACL{
		Principal: a.Principal, ResourceType: string(a.Resource), Name: a.Name, Prefix: a.Prefix, Operation: string(a.Op),
	}
}
