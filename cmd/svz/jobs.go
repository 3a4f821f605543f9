package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	adcloudrun "github.com/supervaize/svz/adapters/cloudrun"
	adlambda "github.com/supervaize/svz/adapters/lambda"
	"github.com/supervaize/svz/core/jobs"
	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/bolt"
	"github.com/supervaize/svz/core/store/storeenv"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/awsapi/awschain"
)

// Queues svz jobs hands a retried or cancelled job to (--queue).
const (
	queueAuto       = "auto"
	queueSQS        = "sqs"
	queueCloudTasks = "cloud-tasks"
	queuePool       = "pool"
)

type jobsFlags struct {
	agent, workspace, queue string
	json                    bool
	timeout                 time.Duration
}

// newJobsCmd is `svz jobs list|show|retry|cancel`: the operator's controls over the background
// jobs in the store the SUPERVAIZER_STORE settings name.
func newJobsCmd(getenv func(string) string) *cobra.Command {
	f := &jobsFlags{}
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List, inspect, retry and cancel background jobs in the controller's store",
		Long: `Operator controls over the background jobs (package jobs) in the store the controller uses, opened
from the same settings (SUPERVAIZER_STORE, SUPERVAIZER_DATA_DIR, SUPERVAIZER_STORE_URL,
SUPERVAIZER_STORE_TABLE, and AWS_REGION and credentials for DynamoDB):

  svz jobs list   [--agent SLUG] [--workspace WS]   the jobs, newest first, with status and error
  svz jobs show   JOB                               a job's steps (tries, errors), fan-out items,
                                                    failure handler, builds and lease
  svz jobs retry  JOB                               run a failed or stopped job again from its first
                                                    unfinished step (completed steps are kept)
  svz jobs cancel JOB                               stop a job, as job.stop does

JOB is a job id; --agent and --workspace say whose when several agents or workspaces have one of
that id (without them the store is searched for it). A retry or a cancel hands the job to the
platform's queue (--queue): the SQS queue of SUPERVAIZER_JOBS_QUEUE_URL (Lambda), the Cloud Tasks
queue of SUPERVAIZER_JOBS_QUEUE (Cloud Run, with SUPERVAIZER_JOBS_INVOKER, SUPERVAIZER_PUBLIC_URL
and Application Default Credentials), else the index of the in-process pool, which a plain server
or local mode on this store scans every 10 s and at its start. A bolt store is open in one process
at a time: while a local server runs, use its workbench's jobs page (/manage/#/jobs).

On DynamoDB, list (and a JOB given without --agent and --workspace) scans the whole table: one
request per MB, half a read unit per 4 KB (see docs/jobs.md, "Operator controls").`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.agent, "agent", "", "the agent's slug")
	pf.StringVar(&f.workspace, "workspace", "", "the workspace id (local mode's is local)")
	pf.BoolVar(&f.json, "json", false, "print JSON instead of a table")
	pf.DurationVar(&f.timeout, "timeout", 2*time.Minute, "overall time limit")
	run := func(do func(ctx context.Context, op *operatorCLI, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if f.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, f.timeout)
				defer cancel()
			}
			op, err := openOperator(ctx, cmd, f, getenv)
			if err != nil {
				return err
			}
			defer op.close()
			return do(ctx, op, args)
		}
	}
	list := &cobra.Command{
		Use:   "list [--agent SLUG] [--workspace WS]",
		Short: "List the jobs (of an agent, of a workspace), newest first",
		Args:  cobra.NoArgs,
		RunE:  run(func(ctx context.Context, op *operatorCLI, _ []string) error { return op.list(ctx) }),
	}
	show := &cobra.Command{
		Use:   "show JOB",
		Short: "Show a job: its status, steps with tries and errors, fan-out items, failure handler, builds, lease",
		Args:  cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, op *operatorCLI, args []string) error {
			return op.control(ctx, args[0], op.svc.Show, nil)
		}),
	}
	retry := &cobra.Command{
		Use:   "retry JOB",
		Short: "Run a failed or stopped job again from its first unfinished step",
		Long: `Run a failed or stopped job again from its first unfinished step: its completed steps keep their
records and are not run again, its failed step gets its attempts again, and the job gets its
timeout again from now. The job is handed to the platform's queue (--queue). A job that has not
ended is refused (cancel it first); so is one whose completed steps' records expired.`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, op *operatorCLI, args []string) error {
			return op.control(ctx, args[0], op.svc.Retry, op.retried)
		}),
	}
	cancelCmd := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Stop a job, as job.stop does",
		Long: `Stop a job, as job.stop does: the stop is recorded and the job handed to the platform's queue
(--queue), whose delivery, on an instance of the agent, stops it (running a failure handler
declared with AlsoWhenStopped); a job that runs stops at its next lease renewal (within 10 s). A
job that has ended is refused.`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, op *operatorCLI, args []string) error {
			return op.control(ctx, args[0], op.svc.Cancel, op.cancelled)
		}),
	}
	for _, c := range []*cobra.Command{retry, cancelCmd} {
		c.Flags().StringVar(&f.queue, "queue", queueAuto, "where the job is handed: auto, sqs, cloud-tasks or pool (auto: sqs when SUPERVAIZER_JOBS_QUEUE_URL is set, cloud-tasks when SUPERVAIZER_JOBS_QUEUE is, else pool)")
	}
	cmd.AddCommand(list, show, retry, cancelCmd)
	return cmd
}

// operatorCLI is one svz jobs run: the store, the operator controls over it, where it prints.
type operatorCLI struct {
	f      *jobsFlags
	getenv func(string) string
	store  store.Store
	svc    *jobs.Service
	out    io.Writer
	queue  string // what the dispatcher is, for the messages; "" until one is needed
	log    *slog.Logger
}

func openOperator(ctx context.Context, cmd *cobra.Command, f *jobsFlags, getenv func(string) string) (*operatorCLI, error) {
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := storeenv.Open(ctx, getenv, storeenv.WithLogger(log))
	if errors.Is(err, bolt.ErrLocked) {
		return nil, fmt.Errorf("%w\nsvz jobs: a running server (local mode?) has the bolt store open: use its workbench's jobs page (http://127.0.0.1:PORT/manage/#/jobs), or stop it first", err)
	}
	if err != nil {
		return nil, err
	}
	op := &operatorCLI{f: f, getenv: getenv, store: s, out: cmd.OutOrStdout(), log: log}
	var d jobs.Dispatcher
	if cmd.Flags().Lookup("queue") != nil {
		if d, op.queue, err = op.dispatcher(); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	op.svc = jobs.NewService(jobs.Config{Store: s, Dispatcher: d, Logger: log,
		Works: func(string) (*jobs.Registry, time.Duration, bool) { return nil, 0, false }})
	return op, nil
}

func (op *operatorCLI) close() {
	op.svc.Close()
	if err := op.store.Close(); err != nil {
		op.log.Warn("closing the store", "error", err)
	}
}

// dispatcher is the queue a retried or cancelled job is handed to (--queue), and how the output
// names it.
func (op *operatorCLI) dispatcher() (jobs.Dispatcher, string, error) {
	sqsURL := strings.TrimSpace(op.getenv(adlambda.EnvQueueURL))
	tasks := strings.TrimSpace(op.getenv(adcloudrun.EnvJobsQueue))
	kind := op.f.queue
	switch kind {
	case queueAuto:
		switch {
		case sqsURL != "" && tasks != "":
			return nil, "", fmt.Errorf("both %s (Lambda) and %s (Cloud Run) are set: unset the one of the other platform, or choose with --queue sqs or --queue cloud-tasks",
				adlambda.EnvQueueURL, adcloudrun.EnvJobsQueue)
		case sqsURL != "":
			kind = queueSQS
		case tasks != "":
			kind = queueCloudTasks
		case strings.EqualFold(strings.TrimSpace(op.getenv(storeenv.Kind)), "dynamodb"):
			return nil, "", fmt.Errorf("%s=dynamodb and no queue is set: set %s to the SQS queue of the Lambda function that runs the jobs (svz deploy status shows it), or give --queue pool for a plain server on this table",
				storeenv.Kind, adlambda.EnvQueueURL)
		default:
			kind = queuePool
		}
	}
	switch kind {
	case queueSQS:
		q, err := adlambda.NewQueue(op.getenv, awsapi.WithFallback(awschain.Fallback(op.getenv)))
		if err != nil {
			return nil, "", err
		}
		return q, "the SQS queue " + awsapi.ShownURL(q.URL()), nil
	case queueCloudTasks:
		q, err := adcloudrun.JobsFromEnv(op.getenv, op.log)
		if err != nil {
			return nil, "", err
		}
		q.UseToken(adcToken)
		return q, "the Cloud Tasks queue " + tasks, nil
	case queuePool:
		return jobs.PoolIndex{Store: op.store}, "the in-process pool's index (a plain server or local mode on this store runs it at its next scan, within 10 s, or when it starts)", nil
	}
	return nil, "", fmt.Errorf("--queue %q: want auto, sqs, cloud-tasks or pool", op.f.queue)
}

// resolve names the job id: with --agent and --workspace, that job; else the one job of that id
// the store holds (searched for).
func (op *operatorCLI) resolve(ctx context.Context, id string) (jobs.Ref, error) {
	ref := jobs.Ref{Agent: op.f.agent, Workspace: op.f.workspace, Job: id}
	if strings.TrimSpace(id) == "" {
		return ref, errors.New("JOB is empty: give the job's id (svz jobs list shows them)")
	}
	if ref.Agent != "" && ref.Workspace != "" {
		return ref, nil
	}
	found, err := op.svc.List(ctx, ref)
	if err != nil {
		return ref, err
	}
	switch len(found) {
	case 0:
		return ref, fmt.Errorf("%w: no job %q%s in this store (%s): svz jobs list shows the jobs", jobs.ErrNoJob, id, op.scope(), op.storeName())
	case 1:
		return found[0].Ref, nil
	}
	var where []string
	for _, j := range found {
		where = append(where, "--agent "+j.Agent+" --workspace "+j.Workspace)
	}
	return ref, fmt.Errorf("%d jobs have the id %q: say which with %s", len(found), id, strings.Join(where, ", or "))
}

// scope is what --agent and --workspace narrowed a search to, for a message.
func (op *operatorCLI) scope() string {
	var parts []string
	if op.f.agent != "" {
		parts = append(parts, "of agent "+op.f.agent)
	}
	if op.f.workspace != "" {
		parts = append(parts, "in workspace "+op.f.workspace)
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, " ")
}

// storeName names the store the settings chose, never its URL (it may hold a password).
func (op *operatorCLI) storeName() string {
	kind := strings.ToLower(strings.TrimSpace(op.getenv(storeenv.Kind)))
	switch kind {
	case "", "bolt":
		dir := strings.TrimSpace(op.getenv(storeenv.DataDir))
		if dir == "" {
			dir = storeenv.DefaultDataDir
		}
		return "bolt, " + dir
	case "dynamodb", "postgres":
		if t := strings.TrimSpace(op.getenv(storeenv.Table)); t != "" {
			return kind + ", table " + t
		}
	}
	return kind
}

func (op *operatorCLI) list(ctx context.Context) error {
	l, err := op.svc.List(ctx, jobs.Ref{Agent: op.f.agent, Workspace: op.f.workspace})
	if err != nil {
		return err
	}
	if op.f.json {
		if l == nil {
			l = []jobs.Summary{}
		}
		return writeJSON(op.out, l)
	}
	if len(l) == 0 {
		fmt.Fprintf(op.out, "No jobs%s in this store (%s).\n", op.scope(), op.storeName())
		return nil
	}
	var head []string
	if op.f.agent == "" {
		head = append(head, "AGENT")
	}
	if op.f.workspace == "" {
		head = append(head, "WORKSPACE")
	}
	rows := [][]string{append(head, "JOB", "WORK", "STATUS", "CREATED", "NOTE")}
	for _, j := range l {
		var row []string
		if op.f.agent == "" {
			row = append(row, j.Agent)
		}
		if op.f.workspace == "" {
			row = append(row, j.Workspace)
		}
		rows = append(rows, append(row, j.Job, j.Work, j.Status, stamp(j.Created), note(j)))
	}
	return table(op.out, rows)
}

// note is a listing's last column: the error, or why the job waits.
func note(j jobs.Summary) string {
	if j.Error != "" {
		return oneLine(j.Error)
	}
	if w := j.Waiting; w != nil {
		s := "waits for " + w.Reason
		switch {
		case w.Step != "":
			s += " of step " + w.Step
		case w.Limit != "":
			s += " " + w.Limit
		}
		if !w.Until.IsZero() {
			s += " until " + stamp(w.Until)
		}
		return s
	}
	return ""
}

// control runs an operator control on the job id names, and prints the job after what said (nil:
// nothing) says of it.
func (op *operatorCLI) control(ctx context.Context, id string, do func(context.Context, jobs.Ref) (*jobs.Detail, error), said func(*jobs.Detail) string) error {
	ref, err := op.resolve(ctx, id)
	if err != nil {
		return err
	}
	d, err := do(ctx, ref)
	if err != nil {
		return err
	}
	msg := ""
	if said != nil {
		msg = said(d)
	}
	return op.detail(d, msg)
}

func (op *operatorCLI) retried(d *jobs.Detail) string {
	return fmt.Sprintf("Job %s is pending again (retry %d), handed to %s: it runs from its first unfinished step.", d.Job, d.Retries, op.queue)
}

func (op *operatorCLI) cancelled(d *jobs.Detail) string {
	if d.Status == jobs.StatusRunning {
		return fmt.Sprintf("Job %s is asked to stop: the instance that runs it stops it at its next lease renewal (within %s).", d.Job, jobs.DefaultLease/3)
	}
	return fmt.Sprintf("Job %s is asked to stop and handed to %s: its delivery stops it.", d.Job, op.queue)
}

// detail prints a job, after a line saying what was done (text only).
func (op *operatorCLI) detail(d *jobs.Detail, done string) error {
	if op.f.json {
		return writeJSON(op.out, d)
	}
	w := op.out
	if done != "" {
		fmt.Fprintf(w, "%s\n\n", done)
	}
	var fields [][]string
	field := func(k, v string) {
		if v != "" {
			fields = append(fields, []string{k, v})
		}
	}
	field("Job", d.Job)
	field("Agent", d.Agent)
	field("Workspace", d.Workspace)
	field("Work", d.Work)
	field("Mission", d.Mission)
	status := d.Status
	if d.StopRequested {
		status += " (stop requested)"
	}
	field("Status", status)
	field("Error", oneLine(d.Error))
	field("Cancelled", oneLine(d.Cancelled))
	field("Waiting", strings.TrimPrefix(note(jobs.Summary{Waiting: d.Waiting}), "waits for "))
	field("Created", stamp(d.Created))
	field("Deadline", stamp(d.Deadline))
	field("Deliveries", fmt.Sprint(d.Deliveries))
	if d.Retries > 0 {
		field("Retries", fmt.Sprintf("%d, the last at %s", d.Retries, stamp(d.Retried)))
	}
	if d.Holder != "" {
		field("Lease", fmt.Sprintf("held by %s until %s", d.Holder, stamp(d.LeaseUntil)))
	}
	field("Builds", strings.Join(d.Builds, "; "))
	if f := d.Failure; f != nil {
		h := f.State + " (cause " + f.Cause
		if f.Tries > 0 {
			h += fmt.Sprintf(", %d failed tries, last error: %s", f.Tries, oneLine(f.Error))
		}
		field("Failure handler", h+")")
	}
	if err := table(w, fields); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(d.Steps) == 0 {
		fmt.Fprintln(w, "No steps yet.")
		return nil
	}
	multi := len(d.Builds) > 1
	head := []string{"RECORD", "STEP", "KIND", "STATUS", "TRIES", "NOTE"}
	if multi {
		head = append(head, "BUILD")
	}
	rows := [][]string{head}
	for _, st := range d.Steps {
		rec, tries := "-", "-"
		if st.Record > 0 {
			rec = fmt.Sprint(st.Record)
		}
		if st.Tries > 0 {
			tries = fmt.Sprint(st.Tries)
		}
		row := []string{rec, oneLine(st.Name), st.Kind, st.Status, tries, stepNote(st)}
		if multi {
			row = append(row, st.Build)
		}
		rows = append(rows, row)
	}
	return table(w, rows)
}

// stepNote is a step's last column: its error, items, wake time or answer.
func stepNote(st jobs.StepDetail) string {
	var parts []string
	if it := st.Items; it != nil {
		s := fmt.Sprintf("%d/%d items", it.Done, it.Total)
		for i := range it.Total {
			if n, ok := it.Failed[i]; ok {
				s += fmt.Sprintf(", item %d failed %d×", i, n)
			}
		}
		parts = append(parts, s)
	}
	if !st.Until.IsZero() {
		parts = append(parts, "wakes at "+stamp(st.Until))
	}
	if st.AnsweredBy != "" || !st.AnsweredAt.IsZero() {
		parts = append(parts, strings.TrimSpace("answered by "+st.AnsweredBy+" at "+stamp(st.AnsweredAt)))
	}
	if st.Error != "" {
		parts = append(parts, "last error: "+oneLine(st.Error))
	}
	return strings.Join(parts, "; ")
}

// table writes rows as aligned columns, without trailing spaces.
func table(w io.Writer, rows [][]string) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// stamp writes a time as the table shows it: UTC, to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// oneLine keeps a cell on its line.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ", "\x1f", " ").Replace(s)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
