package deliberation

// Mark is a transition of a game's own state machine that a message makes
// (seed 004 §7.1: a round starts, a conversation starts or ends, a vote
// is called, a result is announced). The engine logs each one with the
// job as game_id and the checkpoint in force.
type Mark struct {
	// From and To are the game's status before and after the message
	// (ROUND_2_CONVO_1, ROUND_3_ISSUE_2_VOTING, ...).
	From, To string
	// Event names what happened (CONVERSATION_END, RESULT_ADOPTED, ...).
	Event string
	// Actor is the participant whose act it is (the chair announcing, a
	// party ending its conversation early).
	Actor string
	// Boundary, if set, makes the message a safe boundary of the game
	// (seed 004 §2.2: the end of a private conversation, of a round, of a
	// vote): the engine records a recovery point after it, named by it
	// ("r2-c1-end"), from which the game can resume as it was.
	Boundary string
}

// Marker is a Session that names the transitions its messages make.
type Marker interface {
	// Marks are the transitions msgs make when they follow the session's
	// committed messages, in order.
	Marks(msgs []Message) ([]Mark, error)
	// Boundary is the safe boundary committed message m is ("" if none):
	// the same rule Marks applies, for messages committed without the
	// engine (a steward's input), whose point the next step records.
	Boundary(m Message) string
}
