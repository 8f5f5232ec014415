-- Semaphore extend, on this node (extendPermit, extend/kinds.lua). KEYS
-- and ARGV as for sem/acquire.lua.
-- Returns 1 when our live permit was extended, 2 when it was gone and
-- was put back (healed: fewer than the limit were held), 0 when it is
-- gone and was not (nothing is changed then).
return extendPermit(1, 1, ARGV[1], ARGV[2], ARGV[3], ARGV[4])
