package sample

func TestNotCounted() {}

var NotCounted int
