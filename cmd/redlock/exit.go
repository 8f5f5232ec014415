package main

// Exit codes. They follow sysexits(3) where one fits, and the shell's
// conventions (126, 127, 128+signal) for the command that `run` starts, so
// that scripts can tell the command's own failure from the lock's.
//
// `redlock run` and `redlock elect` exit with the command's own code when
// the command ran under the lock (the leadership) to its end; a command
// killed by a signal gives 128+n.
const (
	// exitOK: success (status: every node answered; without --key, a
	// quorum of nodes is healthy).
	exitOK = 0
	// exitFailure: any other error (an unexpected I/O error).
	exitFailure = 1
	// exitUsage: bad flags, a bad or duplicate node URL, a bad TTL
	// (EX_USAGE). redlock-lab uses the same code.
	exitUsage = 64
	// exitUnavailable: status could not reach every node; without --key,
	// fewer than a quorum of nodes are healthy (EX_UNAVAILABLE).
	exitUnavailable = 69
	// exitLockLost: the lock was lost while the command ran; the command
	// was sent SIGTERM, then SIGKILL after --grace. Its own exit code is
	// not reported: it ran, for a while, without the lock.
	exitLockLost = 70
	// exitNotObtained: the lock was not obtained within --wait, because
	// other holders kept it or too few nodes answered (EX_TEMPFAIL: try
	// again later).
	exitNotObtained = 75
	// exitCannotRun: the command was found but could not be started.
	exitCannotRun = 126
	// exitNotFound: the command was not found.
	exitNotFound = 127
	// exitSignal: added to the number of the signal that ended the
	// command (or that stopped redlock while it waited for the lock).
	exitSignal = 128
)

// exitCodesHelp documents the codes for `redlock help`; docs/cli.md has
// the same table.
const exitCodesHelp = `Exit codes:
  0       run, elect: the command succeeded under the lock (while
          leader); elect --observe: interrupted (SIGINT, SIGTERM);
          status: every node answered (without --key: a quorum of
          nodes is healthy)
  N       run, elect: the command's own exit code, whatever it is; the
          codes 64, 70, 75, 126 and 127 of redlock itself always come
          with a "redlock run: ..." ("redlock elect: ...") line on stderr
  1       status: other failure
  64      usage error: bad flag, bad or duplicate node URL, bad TTL
          (EX_USAGE)
  69      status: some node did not answer; without --key: fewer
          than a quorum of nodes healthy (EX_UNAVAILABLE)
  70      run, elect: the lock (leadership) was lost while the command
          ran; the command was sent SIGTERM, then SIGKILL after --grace
  75      run, elect: the lock was not obtained (not elected) within
          --wait (EX_TEMPFAIL); -E N (--conflict-exit-code) chooses
          another code
  126     run, elect: the command could not be started
  127     run, elect: the command was not found
  128+n   run, elect: the command was killed by signal n, or redlock got
          signal n while waiting for the lock (campaigning)
`
