package main

// strata bucket ls and verify: the cold tier as the object store holds it,
// read directly, without a broker, through the same object_store settings
// as strata serve (a config file, STRATA_OBJECT_STORE_* variables, flags).
// They only read: nothing in the bucket changes, so they are safe to run
// beside a cluster that writes it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/human"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore"
)

func init() { storeCommands = append(storeCommands, newBucketCommand) }

// Exit codes of the bucket commands.
const (
	exitProblems = 1 // the check found the bucket unsound
	exitUsage    = 2 // a usage error, or the store could not be read
)

// bucketFlags are the flags every bucket command takes: where the store
// is, named as strata serve names it.
type bucketFlags struct {
	configFile string
	// cfg is what open loaded, for explaining the store's errors.
	cfg config.Broker
}

// explain turns an error of the store into one line that says what to
// check, where it is of a kind a setting explains.
func (f *bucketFlags) explain(err error) error {
	return broker.ExplainStoreError(f.cfg, err)
}

// storeFlag reports whether the broker setting behind flag name says
// where the cold tier is. create_bucket is left out: the commands create
// nothing.
func storeFlag(name string) bool {
	return name == "data-dir" || (strings.HasPrefix(name, "object-store-") && name != "object-store-create-bucket")
}

func (f *bucketFlags) register(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.configFile, "config", "", "YAML config file of strata serve; only its object_store settings and data_dir are used")
	// The broker's own flags, so that names, types and help match serve's
	// and config.Load applies them; only those naming the store.
	all := pflag.NewFlagSet("broker", pflag.ContinueOnError)
	config.BindFlags(all)
	all.VisitAll(func(fl *pflag.Flag) {
		if !storeFlag(fl.Name) {
			return
		}
		if fl.Name == "data-dir" {
			fl.Usage = "data directory of strata serve: the fs store is <data_dir>/objects unless --object-store-path names another"
		}
		pf.AddFlag(fl)
	})
}

// open loads the settings as strata serve does and opens a read-only view
// of the store they name. where describes it for people.
func (f *bucketFlags) open(ctx context.Context, cmd *cobra.Command) (r objstore.Reader, where string, err error) {
	cfg, err := config.Load(f.configFile, os.LookupEnv, cmd.Flags())
	if err != nil {
		return nil, "", &exitError{code: exitUsage, err: err}
	}
	f.cfg = cfg
	o := cfg.ObjectStore
	switch o.Type {
	case config.ObjectStoreNone:
		return nil, "", &exitError{code: exitUsage, err: usageErrorf("object_store.type is none: there is no cold tier to read; give --object-store-type fs or s3, or the --config of a broker that has one")}
	case config.ObjectStoreFS:
		where, _ = filepath.Abs(cfg.ObjectStorePath())
	case config.ObjectStoreS3:
		where = "s3://" + o.Bucket
		if o.Endpoint != "" {
			where += " at " + o.Endpoint
		}
	}
	// Read-only, and creating nothing: an fs store is not objstore.NewDir,
	// which would make a missing directory and delete the temp files of a
	// broker's uploads in flight.
	r, err = broker.OpenReadOnlyStore(ctx, cfg)
	if errors.Is(err, fs.ErrNotExist) {
		err = usageErrorf("no fs object store at %s: see --object-store-path, --data-dir (the store is <data_dir>/objects by default), or give --config with the broker's config file (a broker using S3 or MinIO keeps nothing there)", where)
	}
	if err != nil {
		return nil, "", &exitError{code: exitUsage, err: f.explain(err)}
	}
	if o.Prefix != "" {
		where += ", prefix " + o.Prefix
	}
	// Say which store is read before reading it: a broker run with MinIO
	// keeps nothing in ./data/objects, and an empty listing of the wrong
	// store looks like an empty cold tier.
	note := ""
	if f.defaulted(cmd) {
		note = " (the default fs store; for a broker's own store give --config with its config file, or its --object-store-* flags)"
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "reading %s%s\n", where, note)
	return r, where, nil
}

// defaulted reports whether nothing named the store: no --config, no flag
// and no environment variable of the store, so the default
// ./data/objects is read.
func (f *bucketFlags) defaulted(cmd *cobra.Command) bool {
	if f.configFile != "" {
		return false
	}
	changed := false
	cmd.Flags().Visit(func(fl *pflag.Flag) { changed = changed || storeFlag(fl.Name) })
	if changed {
		return false
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "STRATA_OBJECT_STORE_") || strings.HasPrefix(kv, "STRATA_DATA_DIR=") {
			return false
		}
	}
	return true
}

func newBucketCommand() *cobra.Command {
	var f bucketFlags
	cmd := &cobra.Command{
		Use:   "bucket",
		Short: "Inspect and verify the cold tier in the object store, without a broker",
		Long: `Read the cold tier straight from the object store: what it holds (ls) and
whether it is sound (verify). No broker is needed, and nothing is written,
so both are safe beside a running cluster and on a copy of a bucket.

The store is found as strata serve finds it: defaults, then the YAML file
given with --config (the broker's own config file: the simplest way to read
the store a broker writes, MinIO or S3 included), then STRATA_OBJECT_STORE_*
(and STRATA_DATA_DIR) environment variables, then the flags below. With none
of them it reads the fs store of "make run", ./data/objects. The first line
on stderr names the store read. Give S3 secrets through the
environment (STRATA_OBJECT_STORE_SECRET_KEY), or leave both keys empty for
the standard AWS credential chain.

Exit status: 0 when all is well, 1 when verify finds a problem (or ls a
manifest it cannot read), 2 for a usage error or a store that cannot be
read.`,
		Example: `  # the fs store of a broker started with the defaults (./data/objects)
  strata bucket ls

  # with a broker's config file
  strata bucket verify --config /etc/strata/strata.yaml

  # a MinIO bucket, secret from the environment
  STRATA_OBJECT_STORE_SECRET_KEY=... strata bucket ls --object-store-type s3 \
    --object-store-endpoint http://127.0.0.1:9000 --object-store-bucket strata \
    --object-store-access-key strata --object-store-prefix prod`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := groupRun(cmd, args); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return nil
		},
	}
	f.register(cmd)
	// A mistyped flag is a usage error (2), not a finding (1).
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: usageErrorf("%s (see %s --help)", suggestFlag(c, err), c.CommandPath())}
	})
	cmd.AddCommand(newBucketLsCommand(&f), newBucketVerifyCommand(&f))
	return cmd
}

// bucketRun wraps the body of a bucket command: a context that Ctrl-C
// ends, and exit status 2 for every error that does not ask for another.
func bucketRun(body func(ctx context.Context, cmd *cobra.Command) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := exactArgs()(cmd, args); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		ctx, stop := signalContext(cmd.Context())
		defer stop()
		err := body(ctx, cmd)
		var ee *exitError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ee):
			return err
		case ctx.Err() != nil && errors.Is(err, context.Canceled):
			return &exitError{code: exitUsage, err: errInterrupted}
		}
		return &exitError{code: exitUsage, err: err}
	}
}

// checkBucketTopic refuses a --topic that cannot name a directory of the layout.
func checkBucketTopic(topic string) error {
	if strings.Contains(topic, "/") {
		return &exitError{code: exitUsage, err: usageErrorf("--topic %q: a topic name has no '/'", topic)}
	}
	return nil
}

func newBucketLsCommand(f *bucketFlags) *cobra.Command {
	var topic string
	var format outputFlag
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the topics and partitions the cold tier holds",
		Long: `List every partition whose manifest the bucket holds, one row each, as the
manifests say: the topic and its id (a topic deleted and created again has
two), the partition, the segments and their bytes, the offsets held (START
up to, not including, END), the smallest and largest record timestamps, the
leader epoch and the generation (commits so far) of the manifest head.

It reads manifests only, never a segment: use verify to check the objects.
--format json writes one JSON document instead (docs/CLI.md).`,
		Example: `  strata bucket ls
  strata bucket ls --topic orders --config strata.yaml`,
		RunE: bucketRun(func(ctx context.Context, cmd *cobra.Command) error {
			if err := checkBucketTopic(topic); err != nil {
				return err
			}
			if err := format.check(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			r, where, err := f.open(ctx, cmd)
			if err != nil {
				return err
			}
			rows, err := tiering.ListBucket(ctx, r, topic)
			if err != nil {
				return f.explain(err)
			}
			if topic != "" && len(rows) == 0 {
				return &exitError{code: exitUsage, err: usageErrorf("no manifest of topic %q in %s", topic, where)}
			}
			if len(rows) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "no manifest in %s\n", where)
			}
			if format == outputJSON {
				err = writeJSON(cmd.OutOrStdout(), bucketJSON(where, rows))
			} else {
				err = printBucketRows(cmd.OutOrStdout(), rows)
			}
			if err != nil {
				return err
			}
			bad := 0
			for _, row := range rows {
				if row.Err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", row.Ref.ManifestKey(), row.Err)
					bad++
				}
			}
			if bad > 0 {
				return &exitError{code: exitProblems, err: fmt.Errorf("%s could not be read; strata bucket verify tells more", nounCount(bad, "manifest"))}
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&topic, "topic", "", "list only this topic's partitions")
	addOutputFlag(cmd, &format)
	return cmd
}

// The JSON document of strata bucket ls --format json (docs/CLI.md).
type (
	bucketDoc struct {
		Store      string               `json:"store"`
		Partitions []bucketPartitionDoc `json:"partitions"`
	}
	bucketPartitionDoc struct {
		Topic       string `json:"topic"`
		TopicID     string `json:"topic_id"`
		Partition   int32  `json:"partition"`
		Segments    int    `json:"segments"`
		Bytes       int64  `json:"bytes"`
		StartOffset int64  `json:"start_offset"`
		EndOffset   int64  `json:"end_offset"`
		// MinTime and MaxTime are RFC 3339 with milliseconds, empty
		// when the partition holds no segment.
		MinTime     string `json:"min_time"`
		MaxTime     string `json:"max_time"`
		LeaderEpoch int32  `json:"leader_epoch"`
		Generation  uint64 `json:"generation"`
		Error       string `json:"error,omitempty"`
	}
)

func bucketJSON(where string, rows []tiering.PartitionSummary) bucketDoc {
	d := bucketDoc{Store: where, Partitions: []bucketPartitionDoc{}}
	for _, s := range rows {
		p := bucketPartitionDoc{Topic: s.Ref.Topic, TopicID: s.Ref.TopicID, Partition: s.Ref.Partition, Segments: s.Segments, Bytes: s.Bytes,
			StartOffset: s.StartOffset, EndOffset: s.EndOffset, LeaderEpoch: s.LeaderEpoch, Generation: s.Generation}
		if s.Segments > 0 {
			p.MinTime, p.MaxTime = formatMillis(s.MinTs), formatMillis(s.MaxTs)
		}
		if s.Err != nil {
			p.Error = s.Err.Error()
		}
		d.Partitions = append(d.Partitions, p)
	}
	return d
}

// printBucketRows writes the ls table.
func printBucketRows(w io.Writer, rows []tiering.PartitionSummary) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "TOPIC\tTOPIC-ID\tPARTITION\tSEGMENTS\tSIZE\tSTART\tEND\tMIN-TIME\tMAX-TIME\tEPOCH\tGENERATION")
	for _, s := range rows {
		start, end, minTs, maxTs := "-", "-", "-", "-"
		if s.Segments > 0 {
			start, end = strconv.FormatInt(s.StartOffset, 10), strconv.FormatInt(s.EndOffset, 10)
			minTs, maxTs = formatMillis(s.MinTs), formatMillis(s.MaxTs)
		}
		epoch, gen := strconv.Itoa(int(s.LeaderEpoch)), strconv.FormatUint(s.Generation, 10)
		if s.Err != nil && s.Generation == 0 {
			epoch, gen = "?", "?" // the head itself could not be read
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Ref.Topic, s.Ref.TopicID, s.Ref.Partition,
			s.Segments, human.Bytes(s.Bytes), start, end, minTs, maxTs, epoch, gen)
	}
	return tw.Flush()
}

// formatMillis writes a record timestamp as UTC with milliseconds.
func formatMillis(ms int64) string { return time.UnixMilli(ms).UTC().Format(jsonTimeLayout) }

func newBucketVerifyCommand(f *bucketFlags) *cobra.Command {
	var (
		opts   tiering.VerifyOptions
		strict bool
		quiet  bool
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every manifest and every object it names",
		Long: `Check the cold tier against its format (tiering/FORMAT.md) by reading every
manifest and every object the manifests name, whole:

  - each manifest head and closed part: framing and CRC, that it sits where
    its topic, id and partition say, its generation and part list;
  - the segments in manifest order: offsets that follow on with no gap or
    overlap, keys of the layout, leader epochs that never go back (of the
    uploaders, of each segment's epoch lineage, and stamped in the batches);
  - each segment object: there, of the size the manifest says, its trailer,
    index and producer snapshot CRCs, the trailer agreeing with the
    manifest, and every batch: length, magic and CRC, offsets that follow on
    from the segment's first offset to its last, the index entries and the
    log's CRC and time range. With --records every record is decoded too.

A partition's manifest is its head (one object, rewritten on every
upload) and its closed parts: once the head lists 1000 segments, the oldest
of them move into a closed part, an immutable object the head names, so
that the head stays small however long the history. The summary line
counts the partitions, the closed parts and the segments checked.

Each problem is one line, "problem: <object>: <what is wrong>". Objects no
manifest names are listed as orphans with their size: they are not
problems (an upload in flight is one until its commit, and brokers delete
orphans once older than tiering.orphan_grace), unless --strict.

A bucket a cluster is writing can be verified: segments that retention
removes while the check runs are skipped, not reported.

Progress shows on stderr: a bar on a terminal, otherwise a line every 10s.`,
		Example: `  strata bucket verify
  strata bucket verify --topic orders --records
  strata bucket verify --config strata.yaml --parallel 16 --strict`,
		RunE: bucketRun(func(ctx context.Context, cmd *cobra.Command) error {
			if err := checkBucketTopic(opts.Topic); err != nil {
				return err
			}
			if opts.Parallel < 1 {
				return &exitError{code: exitUsage, err: usageErrorf("--parallel %d: want at least 1", opts.Parallel)}
			}
			r, where, err := f.open(ctx, cmd)
			if err != nil {
				return err
			}
			var bar *progressBar
			if !quiet {
				bar = newProgressBar(cmd.ErrOrStderr())
				opts.Progress = bar.update
			}
			rep, err := tiering.VerifyBucket(ctx, r, opts)
			if bar != nil {
				bar.done()
			}
			if err != nil {
				return f.explain(err)
			}
			if opts.Topic != "" && rep.Listed == 0 {
				return &exitError{code: exitUsage, err: usageErrorf("no object of topic %q in %s", opts.Topic, where)}
			}
			return printVerifyReport(cmd.OutOrStdout(), rep, where, opts.Records, strict, time.Now())
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Topic, "topic", "", "check only this topic's objects")
	fl.BoolVar(&opts.Records, "records", false, "also decode every record of every batch (decompressing): slower, proves consumers can decode them")
	fl.IntVar(&opts.Parallel, "parallel", tiering.DefaultVerifyParallel, "segment objects read at once")
	fl.BoolVar(&strict, "strict", false, "count orphans as problems (exit status 1)")
	fl.BoolVarP(&quiet, "quiet", "q", false, "show no progress on stderr")
	return cmd
}

// printVerifyReport writes what verify found, orphans first and problems
// last, where they are seen, and returns the exit error the findings ask
// for.
func printVerifyReport(w io.Writer, rep *tiering.VerifyReport, where string, records, strict bool, now time.Time) error {
	how := "every batch's CRC checked"
	if records {
		how = "every record decoded"
	}
	fmt.Fprintf(w, "checked %s: %s, %s, %s (%s, %d batches; %s)\n", where,
		nounCount(rep.Partitions, "partition"), nounCount(rep.Parts, "closed part"), nounCount(rep.Segments, "segment"),
		human.Bytes(rep.Bytes), rep.Batches, how)
	if rep.Vanished > 0 {
		fmt.Fprintf(w, "skipped %s that retention removed during the check\n", nounCount(rep.Vanished, "segment"))
	}
	for _, o := range rep.Orphans {
		age := "?"
		if !o.ModTime.IsZero() {
			age = max(now.Sub(o.ModTime), 0).Round(time.Second).String()
		}
		fmt.Fprintf(w, "orphan: %s (%s, %s old): %s\n", o.Key, human.Bytes(o.Size), age, o.Why)
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	problems := len(rep.Problems)
	if strict {
		problems += len(rep.Orphans)
	}
	orphans := ""
	if len(rep.Orphans) > 0 {
		orphans = fmt.Sprintf(", %s (%s) that no manifest names", nounCount(len(rep.Orphans), "orphan"), human.Bytes(rep.OrphanBytes))
	}
	if problems > 0 {
		fmt.Fprintf(w, "NOT SOUND: %s%s\n", nounCount(len(rep.Problems), "problem"), orphans)
		return &exitError{code: exitProblems, err: fmt.Errorf("bucket verify: %s in %s", nounCount(problems, "problem"), where)}
	}
	fmt.Fprintf(w, "sound%s\n", orphans)
	return nil
}

// progressBar shows VerifyProgress on stderr: a bar redrawn in place on a
// terminal, at most every tick; elsewhere (a log file, CI) a plain line
// every lineEvery, so a long check shows it is alive and a short one
// prints nothing.
type progressBar struct {
	w   io.Writer
	tty bool
	now func() time.Time

	mu    sync.Mutex
	last  time.Time // of the last line or redraw
	drawn bool      // a bar is on the screen
}

const (
	barTick   = 100 * time.Millisecond
	lineEvery = 10 * time.Second
	barWidth  = 30
)

func newProgressBar(w io.Writer) *progressBar {
	return &progressBar{w: w, tty: isTerminal(w), now: time.Now, last: time.Now()}
}

// isTerminal reports whether w is a character device, as a terminal is;
// without a dependency for it, a device such as /dev/null counts too,
// which only means a bar nobody sees.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (b *progressBar) update(p tiering.VerifyProgress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	finished := p.ObjectsTotal > 0 && p.Objects == p.ObjectsTotal
	if b.tty {
		if now.Sub(b.last) < barTick && !finished {
			return
		}
		fmt.Fprintf(b.w, "\r\x1b[K%s", barLine(p))
		b.drawn = true
	} else {
		if now.Sub(b.last) < lineEvery {
			return
		}
		fmt.Fprintf(b.w, "verify: %s\n", progressText(p))
	}
	b.last = now
}

// done clears the bar, so that what follows starts on a clean line.
func (b *progressBar) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		fmt.Fprint(b.w, "\r\x1b[K")
		b.drawn = false
	}
}

// barLine is "[#########.....]  45%  12/40 objects  1.2 MiB/2.7 MiB".
func barLine(p tiering.VerifyProgress) string {
	filled := 0
	if p.BytesTotal > 0 {
		filled = int(int64(barWidth) * p.Bytes / p.BytesTotal)
	}
	filled = min(max(filled, 0), barWidth)
	return fmt.Sprintf("[%s%s] %s", strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), progressText(p))
}

// progressText is "45% (12 of 40 objects, 1.2 MiB of 2.7 MiB)".
func progressText(p tiering.VerifyProgress) string {
	pct := 100
	if p.BytesTotal > 0 {
		pct = int(100 * p.Bytes / p.BytesTotal)
	}
	return fmt.Sprintf("%3d%% (%d of %d objects, %s of %s)", pct, p.Objects, p.ObjectsTotal, human.Bytes(p.Bytes), human.Bytes(p.BytesTotal))
}
