-- Read lock extend, on this node (extendRead, extend/kinds.lua). KEYS
-- and ARGV as for read/acquire.lua.
-- Returns 1 when our live read lease was extended, 2 when it was gone
-- and was put back (healed), -1 when a writer holds the key (nothing is
-- changed then).
return extendRead(1, 2, ARGV[1], ARGV[2], ARGV[3])
