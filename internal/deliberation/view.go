package deliberation

// View is what one participant of a game may see, for a person who plays
// it (logist play): the messages visible to it and what is its alone (its
// brief, its own stance). Nothing else of the game is in it: other
// participants' private conversations, briefs and stances, and the
// steward's audit messages stay out.
type View struct {
	Participant string `json:"participant"`
	// Name is how the game calls the participant.
	Name string `json:"name"`
	// Role is the manifest agent that plays it (the --as of logist reply).
	Role string `json:"role"`
	// Messages are the committed messages it may see, in order (Visible).
	Messages []Message `json:"messages"`
	// Private is what is for it alone, as text for a person.
	Private string `json:"private,omitempty"`
	// State is the game's state (Session.State).
	State string `json:"state"`
	// Inputs are the inputs (Input.Kind) the participant may give now
	// besides answering its turn, as the game's Input decides them (a
	// negotiation's "end_conversation" while its conversation is open).
	Inputs []string `json:"inputs,omitempty"`
}

// Viewer is a Session that can show one participant's view.
type Viewer interface {
	// View is participant's view; an error says it is not a participant
	// a person may play.
	View(participant string) (*View, error)
}
