package redlock

// The library's fixed waits and bounds, for the external tests
// (package redlock_test) that assert against them. They are unexported
// in the API, whose doc comments state their values.
const (
	FirstContactTimeout = firstContactTimeout
	ReleaseTimeout      = releaseTimeout
	MinLossMargin       = minLossMargin
	MinTokenLen         = minTokenLen
	MinValidity         = minValidity
	DefaultRetryDelay   = defaultRetryDelay
	DefaultDriftFactor  = defaultDriftFactor
)
