package steward

import (
	"fmt"
	"unicode/utf8"
)

// A steward's free text (the reason of a halt, rollback, set, decision or
// schedule's pause or resume; the guidance of a resume, rollback or
// decision) has one limit per field, in characters (Unicode code points),
// checked before the command does anything, whoever sends it (logist, the
// console's API and pages, a cluster node): a text over it is refused
// naming the field, its length and the limit (an OptionError: logist's
// exit 1, the API's 400).
//
// Why these: a reason goes where a protocol session's schema allows 4000
// characters (its session_aborted event, which a halt records); guidance
// becomes part of an agent's prompt. And the manifest, which Logist reads
// at most manifest.MaxSize of, holds each text once (run.reason,
// run.guidance; its audit trail a short excerpt: manifest.Audit), so no
// text under its limit makes a command fail as "manifest too large": even
// escaped at JSON's worst (6 bytes a character) a reason and a guidance
// take under 120 KiB of the 1 MiB. history.jsonl keeps the whole text.
const (
	MaxReasonChars   = 4000
	MaxGuidanceChars = 16000
)

// TextLimits are the limits by field, as the console's and logist's
// documentation states them.
var TextLimits = map[string]int{"reason": MaxReasonChars, "guidance": MaxGuidanceChars}

// MaxVoteReasonChars is the limit of a play vote's public reason (logist
// play --vote --reason, the console's play form and API): the game's own,
// its vote schema's maxLength (schemas/negotiation-vote.json), which
// TestPlayMoveReasonLimit holds this to, so that a reason this check takes
// the schema takes too and no longer one is refused late by the schema.
// (The steward imports no game nor schema: the package map.) It is under
// MaxReasonChars: the game records the reason in its ledger, the manifest
// never holds it.
const MaxVoteReasonChars = 2000

// CheckText refuses text over field's limit (TextLimits; a field without
// one is not checked).
func CheckText(field, text string) error {
	limit, ok := TextLimits[field]
	if !ok {
		return nil
	}
	return checkLimit(field, text, limit)
}

// CheckVoteReason refuses a play vote's reason over MaxVoteReasonChars,
// as CheckText does a steward's reason over its limit.
func CheckVoteReason(reason string) error {
	return checkLimit("reason", reason, MaxVoteReasonChars)
}

// checkLimit refuses text of more than limit characters, naming field,
// the text's length and the limit.
func checkLimit(field, text string, limit int) error {
	if len(text) <= limit {
		return nil // at most a byte a character
	}
	if n := utf8.RuneCountInString(text); n > limit {
		return &OptionError{Field: field, Reason: fmt.Sprintf("is %d characters long, more than the limit of %d", n, limit)}
	}
	return nil
}

// CheckTexts checks a command's reason and guidance (CheckText), reason
// first.
func CheckTexts(reason, guidance string) error {
	if err := CheckText("reason", reason); err != nil {
		return err
	}
	return CheckText("guidance", guidance)
}
