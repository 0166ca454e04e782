package history

import "time"

// Seal encodes recs as one unit exactly as Log.AppendBatch writes them —
// version, sequence numbers from next, each naming its predecessor's hash
// (prev first; GenesisHash for a new history), time (now where unset),
// More on every record but the last, the signed envelope — without a file:
// for stores of history that are not a job folder (cluster mode's
// database). Each line ends with a newline; last is the last record's hash.
func Seal(recs []*Record, next int64, prev string, now time.Time, signer Signer) (lines [][]byte, last string, err error) {
	if prev == "" {
		prev = GenesisHash
	}
	last = prev
	for i, rec := range recs {
		rec.More = i < len(recs)-1
		rec.normalize(true)
		rec.V, rec.Seq, rec.PrevHash = RecordVersion, next+int64(i), last
		if rec.Time == "" {
			rec.Time = now.UTC().Format(time.RFC3339Nano)
		}
		line, hash, err := encodeLine(rec, signer)
		if err != nil {
			return nil, "", err
		}
		lines = append(lines, line)
		last = hash
	}
	return lines, last, nil
}
