package agent

// Params are the model parameters a provider sends with a call, as it
// sends them: request.metadata records them (seed 002: model, temperature,
// max_tokens) in the intent, before the call. A zero field is not sent —
// the server's or the program's own default applies, and Logist records
// nothing rather than guess it.
type Params struct {
	Model       string
	Temperature *float64
	MaxTokens   int
}

// ParamSender is a provider that knows, before it is called, the
// parameters it will send.
type ParamSender interface {
	Params() Params
}

// SentParams is what p will send: its Params, or nothing known for a
// provider that sends no model parameters (the scripted agent, a human,
// Logist's own work).
func SentParams(p Provider) Params {
	if s, ok := p.(ParamSender); ok {
		return s.Params()
	}
	return Params{}
}

// Metadata keys of the parameters (seed 002's request.metadata).
const (
	MetaModel       = "model"
	MetaTemperature = "temperature"
	MetaMaxTokens   = "max_tokens"
)

// Record writes the parameters that are sent into request metadata.
func (p Params) Record(meta map[string]any) {
	if p.Model != "" {
		meta[MetaModel] = p.Model
	}
	if p.Temperature != nil {
		meta[MetaTemperature] = *p.Temperature
	}
	if p.MaxTokens > 0 {
		meta[MetaMaxTokens] = p.MaxTokens
	}
}

// Params are what the request body carries (body uses them): the
// configured model, and temperature and max_tokens when the manifest sets
// them.
func (o *OpenAI) Params() Params {
	return Params{Model: o.Cfg.Model, Temperature: o.Cfg.Temperature, MaxTokens: o.Cfg.MaxTokens}
}

// Params are what the preset passes the program: the role's model (as the
// preset names it to the program), when set. No preset passes a
// temperature or a token limit; the program's own defaults apply.
func (c *PresetCommand) Params() Params {
	return Params{Model: c.Preset.modelArg(c.Model, c.Cfg.BaseURL)}
}

// Params are what the program's request tells it: the role's model, in
// the request's metadata, when set.
func (c *Command) Params() Params { return Params{Model: c.Model} }
