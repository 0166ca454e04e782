package meter

import (
	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
)

// Usage is a count of tokens by kind, in one shape for every API.
type Usage struct {
	// Input is every input token, cache reads and cache writes included.
	Input int64 `json:"input"`
	// CacheRead is the part of Input read from the provider's prompt cache
	// (priced at the cached rate).
	CacheRead int64 `json:"cache_read,omitempty"`
	// CacheWrite is the part of Input written to the prompt cache
	// (Anthropic's cache_creation_input_tokens; priced as input).
	CacheWrite int64 `json:"cache_write,omitempty"`
	// Output is every output token, reasoning ("thinking") included.
	Output int64 `json:"output"`
}

// Tokens is the usage in the history's terms.
func (u Usage) Tokens() history.Tokens {
	return history.Tokens{Input: u.Input, Output: u.Output, Cache: u.CacheRead}
}

func (u Usage) add(v Usage) Usage {
	return Usage{Input: u.Input + v.Input, CacheRead: u.CacheRead + v.CacheRead,
		CacheWrite: u.CacheWrite + v.CacheWrite, Output: u.Output + v.Output}
}

func (u Usage) sub(v Usage) Usage {
	return Usage{Input: u.Input - v.Input, CacheRead: u.CacheRead - v.CacheRead,
		CacheWrite: u.CacheWrite - v.CacheWrite, Output: u.Output - v.Output}
}

// Cost prices usage with the one pricing rule (agent.TokenCost).
func Cost(u Usage, p manifest.Price) float64 { return agent.TokenCost(u.Tokens(), p) }

// bytesPerToken is the estimate of text bytes per token, used for what the
// provider has not reported yet: the request's input (OpenAI's APIs report
// it only at the end) and output streamed since the last report.
const bytesPerToken = 4

// maxTokens bounds a count a provider reports, so that a hostile or broken
// upstream cannot overflow the sums (the cost is capped anyway).
const maxTokens = 1 << 40

// tokens is the sum of counts a provider reported, each bounded by
// maxTokens; -1 if any is negative. A negative count is no count: a
// report holding one is ignored (reportInput, reportOutput), and the
// estimate stands. (Taken as 0, it made a call free: a server that said
// -5 tokens was never charged, and no budget stopped it.)
func tokens(counts ...int64) int64 {
	sum := int64(0)
	for _, n := range counts {
		if n < 0 {
			return -1
		}
		sum += min(n, maxTokens)
	}
	return min(sum, maxTokens)
}

func estimateTokens(bytes int64) int64 { return (bytes + bytesPerToken - 1) / bytesPerToken }

// tally follows the usage of one response: what the provider reported so
// far, and estimates for the rest. The API decoders only translate their
// fields into reportInput, reportOutput and addOutput.
type tally struct {
	inputEstimate int64 // tokens estimated from the request's size

	haveInput             bool
	input                 int64 // every input token, cache included
	cacheRead, cacheWrite int64

	haveOutput bool
	output     int64 // the last output count the provider reported
	since      int64 // output bytes streamed after that report
}

func newTally(requestBytes int) *tally {
	return &tally{inputEstimate: estimateTokens(int64(requestBytes))}
}

// reportInput records the provider's input count (every input token, the
// cache's included). A report with a negative count is ignored (tokens).
func (t *tally) reportInput(input, cacheRead, cacheWrite int64) {
	if input < 0 || cacheRead < 0 || cacheWrite < 0 {
		return
	}
	t.haveInput = true
	t.input = tokens(input)
	t.cacheRead = min(tokens(cacheRead), t.input)
	t.cacheWrite = min(tokens(cacheWrite), t.input-t.cacheRead)
}

// reportOutput records the provider's output count so far (counts are
// cumulative in every API): the estimate of what streamed before it is
// dropped. A negative count is ignored (tokens).
func (t *tally) reportOutput(output int64) {
	if output < 0 {
		return
	}
	t.haveOutput = true
	t.output = tokens(output)
	t.since = 0
}

// addOutput counts output bytes streamed (text, tool arguments, thinking)
// that no report covers yet.
func (t *tally) addOutput(bytes int) {
	t.since = min(t.since+int64(bytes), maxTokens)
}

// usage is the best count now: reported figures, estimates for the rest.
func (t *tally) usage() Usage {
	u := Usage{Input: t.inputEstimate, Output: t.output + estimateTokens(t.since)}
	if t.haveInput {
		u.Input, u.CacheRead, u.CacheWrite = t.input, t.cacheRead, t.cacheWrite
	}
	return u
}

// estimated tells whether usage holds estimates: the provider has not
// reported the input, or not the output, or output streamed after its
// last report.
func (t *tally) estimated() bool { return !t.haveInput || !t.haveOutput || t.since > 0 }
