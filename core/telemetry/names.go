package telemetry

// Attribute keys. OpenTelemetry's semantic conventions where one exists (rpc.*, messaging.*,
// db.*, http.*, server.*, error.type); svz.* otherwise. docs/observability.md lists them.
const (
	RPCSystem         = "rpc.system"             // "jsonrpc"
	RPCMethod         = "rpc.method"             // supervaizer/action.invoke, supervaizer/surface.load
	RPCJSONRPCVersion = "rpc.jsonrpc.version"    // "2.0"
	RPCJSONRPCID      = "rpc.jsonrpc.request_id" // the envelope's id, as sent
	RPCJSONRPCCode    = "rpc.jsonrpc.error_code" // a JSON-RPC error's code
	RPCJSONRPCMessage = "rpc.jsonrpc.error_message"
	HTTPRoute         = "http.route"
	HTTPMethod        = "http.request.method"
	HTTPStatus        = "http.response.status_code"
	ServerAddress     = "server.address"
	ErrorType         = "error.type"
	MessagingSystem   = "messaging.system" // aws_sqs, gcp_cloud_tasks, svz_pool
	DBSystem          = "db.system.name"   // the store backend: bolt, dynamodb, postgres, redis, memory
	DBOperation       = "db.operation.name"

	Agent        = "svz.agent.slug"
	Action       = "svz.action"
	Surface      = "svz.surface"
	Workspace    = "svz.workspace.id"
	RequestID    = "svz.request_id"
	Outcome      = "svz.outcome"           // ok, error (a result with status "error"), rpc_error, refused
	ResultCode   = "svz.result.error_code" // a status "error" result's errors[0].code
	Replayed     = "svz.replayed"          // an idempotent replay: the handler did not run
	Job          = "svz.job.id"
	Work         = "svz.job.work"
	Attempt      = "svz.job.attempt"      // the message's: deliveries handed on before it
	Receive      = "svz.job.receive"      // the queue's receive count of the message
	Deliveries   = "svz.job.deliveries"   // deliveries that ran the work, this one included
	Continuation = "svz.job.continuation" // a delivery after the first (handed on, retried, answered)
	TakeOver     = "svz.job.take_over"    // the previous holder is known to have ended
	JobOutcome   = "svz.job.outcome"      // how the delivery ended, or how the job finished
	Step         = "svz.step.name"
	StepTry      = "svz.step.try" // 1 the first time a step runs
	StepOutcome  = "svz.step.outcome"
	StudioStep   = "svz.studio.step"
	Attempts     = "svz.studio.attempts"
)

// Instrument names: OpenTelemetry's semantic conventions where one exists, svz.* otherwise.
const (
	CallDuration    = "rpc.server.call.duration"     // s, per /a2a call: rpc.method, svz.action|svz.surface, svz.outcome
	StoreDuration   = "db.client.operation.duration" // s, per store request: db.system.name, db.operation.name, error.type
	StudioDuration  = "http.client.request.duration" // s, per Studio call: svz.studio.step, http.response.status_code
	JobsStarted     = "svz.jobs.started"             // {job}: svz.agent.slug, svz.job.work
	JobsFinished    = "svz.jobs.finished"            // {job}: svz.agent.slug, svz.job.work, svz.job.outcome (completed, failed, stopped)
	StepDuration    = "svz.job.step.duration"        // s: svz.job.work, svz.step.outcome
	StepRetries     = "svz.job.step.retries"         // {retry}: svz.job.work
	QueueLag        = "svz.job.queue.lag"            // s, from job.start to its first delivery: messaging.system
	EventStreams    = "svz.events.streams"           // {stream}: open GET /a2a/events clients
	OtherAttribute  = "_OTHER"                       // an unregistered action or surface, in a metric
	JSONRPCSystem   = "jsonrpc"
	JSONRPCVersion2 = "2.0"
)

// DurationBuckets are the explicit bucket bounds, in seconds, of svz's duration histograms (the
// semantic conventions' advice for rpc and http durations).
func DurationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
}
