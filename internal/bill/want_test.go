package bill_test

// What a call costs today (make bench-bill; docs/performance.md#the-bill-per-call).
const (
	// DynamoDB write units of a new keyed job.start and of an unkeyed one.
	wantKeyedWCU   = 4
	wantUnkeyedWCU = 2
	// Write units of a replay (a failed conditional PutItem, billed at the stored item's size).
	wantReplayWCU = 1
	// DynamoDB write units of a background job of jobSteps steps, from its start to its end.
	wantJobWCU = 7
	// PostgreSQL and Redis round trips of a new keyed job.start.
	wantKeyedTrips = 2
)
