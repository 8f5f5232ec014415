-- Folder (path) lock extend, on this node (extendPath,
-- extend/kinds.lua). KEYS and ARGV as for path/acquire.lua.
-- Returns 1 when the path held our token and its lease (and our
-- intention records on its ancestors) was extended, 2 when the path's
-- holder key was missing and put back (healed), -1 when another owner
-- holds the path, 0 when it is missing and another owner holds an
-- ancestor or a descendant (nothing is changed then).
return extendPath(1, #KEYS, ARGV[1], ARGV[2])
