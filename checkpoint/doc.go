// Package checkpoint is the import's durable consumer offset: the file that
// lets an interrupted load continue where it stopped instead of starting over.
//
// # Format
//
// A checkpoint is one JSON document, indented so that a user can read it:
//
//	{
//	  "version": 1,
//	  "checksum": "sha256:9f2c…",
//	  "state": {
//	    "complete": false,
//	    "inputs": [ { "path": "/data/a.ndjson", "size": 1200, … "committed": {"offset": 512, "line": 4} } ],
//	    …
//	  }
//	}
//
// The checksum is the SHA-256 of the line "loader checkpoint <version>\n"
// followed by the compact form of "state" (encoding/json's Compact of the
// bytes as they appear in the file). Covering the version means a damaged
// version digit reads as corruption rather than as a different format, and
// covering the compact form means a whitespace-only reformat (re-indenting,
// CRLF line ends) does not break it while changing any value, key or escape
// does. Load therefore tells apart:
//
//   - a missing file: the error wraps os.ErrNotExist (first run);
//   - a truncated, unparsable or tampered file: *CorruptError, saying what;
//   - an intact file written by another format version: *VersionError.
//
// Later versions must keep the envelope (version, checksum, state) and this
// checksum rule so that an older loader can still say "too new" instead of
// "corrupt".
//
// # Durability
//
// Save writes a temporary file in the checkpoint's own directory (mode 0600),
// fsyncs and closes it, renames it over the checkpoint and fsyncs the
// directory, as litestream and restic do. A crash at any point leaves either
// the old checkpoint or the new one, never a mixture. A crash between write
// and rename can leave a "<name>.tmp-*" file beside the checkpoint; it is
// never read, and a Saver removes it on its first save.
//
// The committed position of an input is the contiguous low-water mark of
// acknowledged records: every record before it has been written, skipped as
// already present or dead-lettered. Past it, its Ahead lists the records
// finished out of order (written, or found present), by their place after
// the mark; a resume reads those without sending them again. Resuming may
// replay records that were in flight or acknowledged after the last save,
// never skip one. A checkpoint without Ahead (from an older loader) resumes
// from its marks alone, and an older loader ignores it.
package checkpoint
