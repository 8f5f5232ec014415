// Command apicount counts the exported identifiers of one Go package and
// fails when they exceed a limit, so that the root package's surface
// cannot grow unnoticed. `make lint` runs it on the root package.
//
// It counts what a user of the package can name: exported types,
// functions, variables and constants, and the exported methods of
// exported types (methods of an unexported type are reachable only
// through an interface the package exports, and are counted there, if at
// all, as that interface). Struct fields and interface methods are part
// of the type that declares them and are not counted. Test files are
// skipped.
//
// Usage:
//
//	go run ./internal/tools/apicount [-limit N] [-v] [dir]
//
// dir defaults to the current directory. With -limit 0 (the default) it
// only prints the count. It exits 1 when the count is above a non-zero
// limit, 2 when the package cannot be parsed.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	limit := flag.Int("limit", 0, "fail when more than this many identifiers are exported (0: no limit)")
	verbose := flag.Bool("v", false, "list every exported identifier by kind")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	os.Exit(run(os.Stdout, dir, *limit, *verbose))
}

func run(w io.Writer, dir string, limit int, verbose bool) int {
	c, err := count(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "apicount: %v\n", err)
		return 2
	}
	if verbose {
		for _, k := range kinds {
			names := c.names[k]
			sort.Strings(names)
			fmt.Fprintf(w, "%s (%d): %s\n", k, len(names), strings.Join(names, " "))
		}
	}
	n := c.total()
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", len(c.names[k]), k))
	}
	fmt.Fprintf(w, "apicount: package %s exports %d identifiers (%s)", c.pkg, n, strings.Join(parts, ", "))
	if limit > 0 {
		fmt.Fprintf(w, "; limit %d", limit)
	}
	fmt.Fprintln(w)
	if limit > 0 && n > limit {
		fmt.Fprintf(w, "apicount: %d over the limit: unexport what no user calls or matches\n", n-limit)
		return 1
	}
	return 0
}

// kinds lists the counted kinds in the order they are printed.
var kinds = []string{"types", "funcs", "methods", "vars", "consts"}

type counts struct {
	pkg   string
	names map[string][]string
}

func (c counts) total() int {
	n := 0
	for _, v := range c.names {
		n += len(v)
	}
	return n
}

// count parses the non-test Go files of dir, which must hold one package.
// Every file is counted, whatever its build constraints: a file excluded
// on this platform is still API on another.
func count(dir string) (counts, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return counts{}, err
	}
	fset := token.NewFileSet()
	c := counts{names: map[string][]string{}}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return counts{}, err
		}
		if c.pkg != "" && f.Name.Name != c.pkg {
			return counts{}, fmt.Errorf("%s: want one package, got %s and %s", dir, c.pkg, f.Name.Name)
		}
		c.pkg = f.Name.Name
		for _, d := range f.Decls {
			c.decl(d)
		}
	}
	if c.pkg == "" {
		return counts{}, fmt.Errorf("%s: no Go files", dir)
	}
	return c, nil
}

func (c counts) add(kind, name string) { c.names[kind] = append(c.names[kind], name) }

func (c counts) decl(d ast.Decl) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return
		}
		if d.Recv == nil {
			c.add("funcs", d.Name.Name)
			return
		}
		if recv := recvType(d.Recv.List[0].Type); ast.IsExported(recv) {
			c.add("methods", recv+"."+d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					c.add("types", s.Name.Name)
				}
			case *ast.ValueSpec:
				kind := "vars"
				if d.Tok == token.CONST {
					kind = "consts"
				}
				for _, n := range s.Names {
					if n.IsExported() {
						c.add(kind, n.Name)
					}
				}
			}
		}
	}
}

// recvType is the name of a method's receiver type: T in T, *T, T[K] and *T[K].
func recvType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
