package sample

// T is counted, with its exported methods M and P (pointer receiver) and
// not its fields or its unexported method.
type T struct{ Field int }

func (T) M()  {}
func (*T) P() {}
func (T) m()  {}

type t struct{}

// Exported is a method of an unexported type: not counted.
func (t) Exported() {}

// I is counted; its methods are not.
type I interface{ Method() }

// G is counted with its method.
type G[K comparable] struct{}

func (*G[K]) Get() {}

func F() {}
func f() {}

var (
	V1, v2 = 1, 2
	V3     int
)

const (
	C1 = iota
	c2
	C3
)
