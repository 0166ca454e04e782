package history

// Link is what chains one stored line to the line before it: its
// sequence, its predecessor's hash, its own hash (the SHA-256 of the exact
// record bytes the line holds) and its record's type. The encoder knows
// them as it seals a line, and hands them over beside the lines of a unit
// (Unit.Links), so the store checking that the unit continues the job's
// history (clusterstore.Apply) does not decode again what this process
// encoded a moment before. A line from anywhere else (read back from a
// file, sent by another process) has none: its reader parses it
// (ParseLine). TestUnitLinksAreTheirLines holds that every link the
// encoder hands over is what ParseLine reads from its line.
type Link struct {
	Seq      int64
	PrevHash string
	Hash     string
	Type     string
}

// linkOf is the link of rec, sealed with hash (encodeLine's).
func linkOf(rec *Record, hash string) Link {
	return Link{Seq: rec.Seq, PrevHash: rec.PrevHash, Hash: hash, Type: rec.Type}
}
