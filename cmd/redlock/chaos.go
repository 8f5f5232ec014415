package main

import (
	"context"
	"fmt"
	"io"
)

// cmdChaos implements `redlock chaos`: the chaos suite of package chaos.
//
// TODO(lead): once package chaos lands, import
// "github.com/seed543a70bd/redlock/chaos" and make the body:
//
//	return chaos.Command(ctx, args, stdout, stderr)
func cmdChaos(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	_, _, _ = ctx, args, stdout
	fmt.Fprintln(stderr, "redlock chaos: the chaos suite is not part of this build yet")
	return exitFailure
}
