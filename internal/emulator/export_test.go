package emulator

// CompactMinBytes lets external tests force compaction of small logs.
var CompactMinBytes = &compactMinBytes
