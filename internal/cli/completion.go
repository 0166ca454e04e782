package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

var cmdCompletion = &command{
	name: "completion", args: "bash|zsh|fish",
	summary: "print a shell completion script: commands, flags, job ids (read from --jobs-dir or $LOGIST_JOBS_DIR as typed; for resume, halt, activate and rollback only the jobs that command can act on now) and the checkpoints after rollback --to",
	example: "  source <(logist completion bash)                     # bash, this shell\n" +
		"  logist completion bash > /etc/bash_completion.d/logist\n" +
		"  logist completion zsh > \"${fpath[1]}/_logist\"        # zsh (compinit loads it)\n" +
		"  logist completion fish > ~/.config/fish/completions/logist.fish\n",
	run: func(e *env, args []string) (*Result, error) {
		if len(args) != 1 {
			return nil, usagef("expected one shell: bash, zsh or fish")
		}
		var s string
		switch args[0] {
		case "bash":
			s = bashCompletion()
		case "zsh":
			s = zshCompletion()
		case "fish":
			s = fishCompletion()
		default:
			return nil, usagef("shell %q: use bash, zsh or fish", args[0])
		}
		return &Result{Text: s, Data: map[string]any{"shell": args[0], "script": s}}, nil
	},
}

// cmdJobs prints the job ids, one per line, for completion scripts: with
// --for COMMAND, only the jobs that command can act on now.
var cmdJobs = &command{
	name: "__jobs", args: "[--for COMMAND]", summary: "print the job ids, one per line (used by shell completion)", hidden: true,
	example: "  logist __jobs --jobs-dir /srv/jobs\n  logist __jobs --for resume\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("for", "", "only the jobs this command can act on now (resume, halt, activate, rollback)")
	},
	run: func(e *env, args []string) (*Result, error) {
		forCmd, _ := e.fs.GetString("for")
		entries, err := e.store.List()
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		ids := []string{}
		for _, en := range entries {
			if en.Unplaced != "" || !canTake(forCmd, en.Manifest) {
				continue
			}
			ids = append(ids, en.ID)
			b.WriteString(en.ID + "\n")
		}
		return &Result{Text: b.String(), Items: ids}, nil
	},
}

// commandEvents are the status changes the steward commands make: a job
// can take one when the lifecycle table lets its status change so, the
// check the command itself makes.
var commandEvents = map[string]lifecycle.Event{
	"resume":   lifecycle.EvResume,
	"halt":     lifecycle.EvHalt,
	"activate": lifecycle.EvActivate,
	"rollback": lifecycle.EvRollback,
}

// canTake reports whether command can act on a job with manifest m (nil:
// an invalid manifest); a command that changes no status takes any job.
func canTake(command string, m *manifest.Manifest) bool {
	ev, ok := commandEvents[command]
	if !ok {
		return true
	}
	return m != nil && lifecycle.Allows(m.Status, ev)
}

// cmdCheckpoints prints the checkpoints a job can be rolled back to, one
// per line, for completing rollback --to (history.RecoveryPoint.Restorable,
// rollback's own rule).
var cmdCheckpoints = &command{
	name: "__checkpoints", args: "JOB", summary: "print the checkpoints JOB can be rolled back to (used by shell completion)", hidden: true,
	example: "  logist __checkpoints fix-login\n",
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		recs, err := history.ReadAll(e.store.JobDir(id))
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		ids := []string{}
		for _, r := range recs {
			if r.RecoveryPoint != nil && r.RecoveryPoint.Restorable() == nil {
				ids = append(ids, r.RecoveryPoint.CheckpointID)
				b.WriteString(r.RecoveryPoint.CheckpointID + "\n")
			}
		}
		return &Result{Text: b.String(), Items: ids}, nil
	},
}

// What a command's positional arguments are, for completion.
const (
	argNone    = ""
	argJob     = "job"
	argJobs    = "jobs" // several
	argFile    = "file"
	argCommand = "command"
	argShell   = "shell"
)

// complCommand is a command as completion scripts see it.
type complCommand struct {
	name, summary, arg string
	flags              []*pflag.Flag
}

// complCommands lists the visible commands (and help, version) with their
// flags, the global ones included, sorted by name.
func complCommands() []complCommand {
	var out []complCommand
	for _, c := range commands {
		if c.hidden {
			continue
		}
		fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
		globalFlags(fs)
		if c.flags != nil {
			c.flags(fs)
		}
		cc := complCommand{name: c.name, summary: c.summary}
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Deprecated == "" {
				cc.flags = append(cc.flags, f)
			}
		})
		a := strings.TrimLeft(c.args, "[")
		switch {
		case c.name == "completion":
			cc.arg = argShell
		case strings.HasPrefix(a, "JOB..."):
			cc.arg = argJobs
		case strings.HasPrefix(a, "JOB"):
			cc.arg = argJob
		case strings.HasPrefix(a, "FILE"):
			cc.arg = argFile
		}
		out = append(out, cc)
	}
	out = append(out,
		complCommand{name: "help", summary: "show help for a command", arg: argCommand},
		complCommand{name: "version", summary: "print the version"})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func globalFlags(fs *pflag.FlagSet) {
	fs.String("jobs-dir", "", "jobs folder (else $LOGIST_JOBS_DIR, else ./jobs)")
	fs.String("format", "text", "output format: text, json or markdown")
	fs.String("database-url", "", "cluster mode: a logistd cluster's PostgreSQL database (else $LOGISTD_DATABASE_URL)")
	fs.BoolP("help", "h", false, "show help")
}

func takesValue(f *pflag.Flag) bool { return f.NoOptDefVal == "" }

// flagValues is what a flag's value completes to: a word list, "dir",
// "file", "checkpoint" (the job's, for rollback --to), or "" for free text.
func flagValues(name string) string {
	switch name {
	case "jobs-dir", "workspace":
		return "dir"
	case "to":
		return "checkpoint"
	case "key":
		return "file"
	case "format":
		return "text json markdown"
	case "kind":
		return "auto manifest response"
	}
	return ""
}

// valueFlagNames lists every flag (as --name) that takes a value.
func valueFlagNames() []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range complCommands() {
		for _, f := range c.flags {
			if takesValue(f) && !seen[f.Name] {
				seen[f.Name] = true
				out = append(out, "--"+f.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

func commandNames() []string {
	var out []string
	for _, c := range complCommands() {
		out = append(out, c.name)
	}
	return out
}

// shortDesc is a flag or command description cut for a completion menu.
func shortDesc(s string) string {
	if i := strings.IndexAny(s, ";("); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(oneLine(s, 70))
}

// --- bash ---

func bashCompletion() string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(`# bash completion for logist; generated by: logist completion bash
# Use: source <(logist completion bash), or save it in /etc/bash_completion.d/logist.

# _logist_run runs logist with the folder named on the command line
# (--jobs-dir), else $LOGIST_JOBS_DIR, else ./jobs.
_logist_run() {
    local i jd=""
    for ((i = 1; i < ${#COMP_WORDS[@]}; i++)); do
        case "${COMP_WORDS[i]}" in
            --jobs-dir)
                jd="${COMP_WORDS[i+1]}"
                # COMP_WORDBREAKS splits --jobs-dir=DIR into three words.
                [[ "$jd" == "=" ]] && jd="${COMP_WORDS[i+2]}"
                ;;
            --jobs-dir=*) jd="${COMP_WORDS[i]#--jobs-dir=}" ;;
        esac
    done
    if [[ -n "$jd" ]]; then
        jd="${jd/#\~/$HOME}"
        command logist "$@" --jobs-dir "$jd" 2>/dev/null
    else
        command logist "$@" 2>/dev/null
    fi
}

# _logist_jobs prints the ids of the jobs command $1 can act on now.
_logist_jobs() {
    _logist_run __jobs --for "$1"
}

# _logist_checkpoints completes the checkpoints that the job named after
# the command word (at index $1) can be rolled back to.
_logist_checkpoints() {
    local j job=""
    for ((j = $1 + 1; j < COMP_CWORD; j++)); do
        case "${COMP_WORDS[j]}" in
            VALUEFLAGS) [[ "${COMP_WORDS[j+1]}" == "=" ]] && ((j++)); ((j++)) ;;
            -*) ;;
            *) job="${COMP_WORDS[j]}"; break ;;
        esac
    done
    [[ -n "$job" ]] && COMPREPLY=($(compgen -W "$(_logist_run __checkpoints "$job")" -- "$cur"))
}

# _logist_files completes file (-f) or folder (-d) names, spaces and all.
_logist_files() {
    local IFS=$'\n'
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen "$1" -- "$cur"))
}

# _logist_skip moves i past a flag's value (--flag VALUE, --flag = VALUE).
_logist_skip() {
    if [[ "${COMP_WORDS[i+1]}" == "=" ]]; then
        ((i += 2))
    else
        ((i += 1))
    fi
}

_logist() {
    local cur prev cmd i
    COMPREPLY=()
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev=""
    if ((COMP_CWORD > 0)); then
        prev="${COMP_WORDS[COMP_CWORD-1]}"
    fi
    # --flag=VALUE arrives as three words: --flag, =, VALUE.
    if [[ "$prev" == "=" ]] && ((COMP_CWORD > 1)); then
        prev="${COMP_WORDS[COMP_CWORD-2]}"
    fi
    cmd=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            --jobs-dir | --format | --database-url) _logist_skip ;;
            -*) ;;
            *) cmd="${COMP_WORDS[i]}"; break ;;
        esac
    done

    # The value of a flag.
    case "$prev" in
`, "VALUEFLAGS", strings.Join(valueFlagNames(), " | ")))
	for _, n := range valueFlagNames() {
		n = strings.TrimPrefix(n, "--")
		switch v := flagValues(n); v {
		case "dir":
			fmt.Fprintf(&b, "        --%s) _logist_files -d; return ;;\n", n)
		case "file":
			fmt.Fprintf(&b, "        --%s) _logist_files -f; return ;;\n", n)
		case "checkpoint":
			fmt.Fprintf(&b, "        --%s) _logist_checkpoints \"$i\"; return ;;\n", n)
		case "":
			fmt.Fprintf(&b, "        --%s) return ;;\n", n)
		default:
			fmt.Fprintf(&b, "        --%s) COMPREPLY=($(compgen -W '%s' -- \"$cur\")); return ;;\n", n, v)
		}
	}
	b.WriteString(`    esac

    if [[ -z "$cmd" ]]; then
        if [[ "$cur" == -* ]]; then
            COMPREPLY=($(compgen -W '--jobs-dir --format --database-url --help --version' -- "$cur"))
        else
            COMPREPLY=($(compgen -W '` + strings.Join(commandNames(), " ") + `' -- "$cur"))
        fi
        return
    fi

    local flags="" arg=""
    case "$cmd" in
`)
	for _, c := range complCommands() {
		var fl []string
		for _, f := range c.flags {
			fl = append(fl, "--"+f.Name)
			if f.Shorthand != "" {
				fl = append(fl, "-"+f.Shorthand)
			}
		}
		fmt.Fprintf(&b, "        %s) flags='%s'; arg='%s' ;;\n", c.name, strings.Join(fl, " "), c.arg)
	}
	b.WriteString(`    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
        return
    fi
    # Arguments already typed after the command.
    local npos=0
    for ((i = i + 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            ` + strings.Join(valueFlagNames(), " | ") + `) _logist_skip ;;
            -*) ;;
            *) ((npos++)) ;;
        esac
    done
    case "$arg" in
        jobs) COMPREPLY=($(compgen -W "$(_logist_jobs "$cmd")" -- "$cur")) ;;
        job) ((npos == 0)) && COMPREPLY=($(compgen -W "$(_logist_jobs "$cmd")" -- "$cur")) ;;
        file) _logist_files -f ;;
        command) ((npos == 0)) && COMPREPLY=($(compgen -W '` + strings.Join(commandNames(), " ") + `' -- "$cur")) ;;
        shell) ((npos == 0)) && COMPREPLY=($(compgen -W 'bash zsh fish' -- "$cur")) ;;
    esac
    return 0
}

complete -F _logist logist
`)
	return b.String()
}

// --- zsh ---

// zshText makes s safe inside a single-quoted _arguments or _describe
// spec: no quotes, brackets or colons.
func zshText(s string) string {
	return strings.NewReplacer("'", "", "[", "(", "]", ")", ":", " -", "\\", "", "`", "").Replace(shortDesc(s))
}

func zshFlagSpecs(flags []*pflag.Flag) []string {
	var out []string
	for _, f := range flags {
		desc := zshText(f.Usage)
		action := ""
		if takesValue(f) {
			switch v := flagValues(f.Name); v {
			case "dir":
				action = ":" + f.Name + ":_files -/"
			case "file":
				action = ":" + f.Name + ":_files"
			case "checkpoint":
				action = ":" + f.Name + ":_logist_checkpoints"
			case "":
				action = ":" + f.Name + ": "
			default:
				action = ":" + f.Name + ":(" + v + ")"
			}
		}
		eq := ""
		if takesValue(f) {
			eq = "="
		}
		if f.Shorthand != "" {
			out = append(out, fmt.Sprintf("'(-%s --%s)'{-%s,--%s%s}'[%s]%s'", f.Shorthand, f.Name, f.Shorthand, f.Name, eq, desc, action))
		} else {
			out = append(out, fmt.Sprintf("'--%s%s[%s]%s'", f.Name, eq, desc, action))
		}
	}
	return out
}

func zshCompletion() string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(`#compdef logist
# zsh completion for logist; generated by: logist completion zsh
# Use: save it as _logist in a folder of $fpath (before compinit runs), or
# source <(logist completion zsh) after compinit.

# _logist_jd sets jd to the --jobs-dir named on the command line (else
# logist uses $LOGIST_JOBS_DIR, else ./jobs).
_logist_jd() {
    local -a all
    local i
    # The whole command line left of the cursor: $words starts at the
    # command word, past a --jobs-dir before it.
    all=(${(Q)${(z)LBUFFER}})
    jd=()
    for (( i = 1; i <= $#all; i++ )); do
        case ${all[i]} in
            --jobs-dir) jd=(--jobs-dir "${all[i+1]/#\~/$HOME}") ;;
            --jobs-dir=*) jd=(--jobs-dir "${${all[i]#--jobs-dir=}/#\~/$HOME}") ;;
        esac
    done
}

# _logist_jobs offers the ids of the jobs the command ($words[1]) can act
# on now.
_logist_jobs() {
    local -a ids jd
    _logist_jd
    ids=(${(f)"$(command logist __jobs --for $words[1] $jd 2>/dev/null)"})
    _describe -t jobs 'job' ids
}

# _logist_checkpoints offers the checkpoints the job named after the
# command word can be rolled back to.
_logist_checkpoints() {
    local -a ids jd
    local i job
    for (( i = 2; i < CURRENT; i++ )); do
        case $words[i] in
            VALUEFLAGS) (( i++ )) ;;
            -*) ;;
            *) job=$words[i]; break ;;
        esac
    done
    [[ -n $job ]] || return 1
    _logist_jd
    ids=(${(f)"$(command logist __checkpoints $job $jd 2>/dev/null)"})
    _describe -t checkpoints 'checkpoint' ids
}

_logist() {
    local curcontext="$curcontext" state line ret=1
    local -a commands
    commands=(
`, "VALUEFLAGS", strings.Join(valueFlagNames(), "|")))
	for _, c := range complCommands() {
		fmt.Fprintf(&b, "        '%s:%s'\n", c.name, zshText(c.summary))
	}
	b.WriteString(`    )
    _arguments -C \
        '--jobs-dir=[jobs folder]:folder:_files -/' \
        '--format=[output format]:format:(text json markdown)' \
        '--database-url=[cluster mode database]:url: ' \
        '(-h --help)'{-h,--help}'[show help]' \
        '--version[print the version]' \
        '(-)1: :->command' \
        '(-)*:: :->args' && ret=0
    case $state in
        command)
            _describe -t commands 'logist command' commands && ret=0
            ;;
        args)
            curcontext="${curcontext%:*:*}:logist-$words[1]:"
            case $words[1] in
`)
	for _, c := range complCommands() {
		specs := zshFlagSpecs(c.flags)
		switch c.arg {
		case argJobs:
			specs = append(specs, "'*:job:_logist_jobs'")
		case argJob:
			specs = append(specs, "'1:job:_logist_jobs'")
		case argFile:
			specs = append(specs, "'*:file:_files'")
		case argCommand:
			specs = append(specs, "'1:command:("+strings.Join(commandNames(), " ")+")'")
		case argShell:
			specs = append(specs, "'1:shell:(bash zsh fish)'")
		}
		if len(specs) == 0 {
			fmt.Fprintf(&b, "                %s) ret=0 ;;\n", c.name)
			continue
		}
		fmt.Fprintf(&b, "                %s)\n                    _arguments \\\n", c.name)
		for i, s := range specs {
			sep := " \\\n"
			if i == len(specs)-1 {
				sep = " && ret=0\n"
			}
			fmt.Fprintf(&b, "                        %s%s", s, sep)
		}
		b.WriteString("                    ;;\n")
	}
	b.WriteString(`            esac
            ;;
    esac
    return ret
}

if [[ "${funcstack[1]}" == "_logist" ]]; then
    _logist "$@"
else
    compdef _logist logist
fi
`)
	return b.String()
}

// --- fish ---

func fishText(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(shortDesc(s), `\`, ``), "'", `\'`)
}

func fishCompletion() string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(`# fish completion for logist; generated by: logist completion fish
# Use: logist completion fish > ~/.config/fish/completions/logist.fish

# The --jobs-dir named on the command line, as logist's arguments (else
# logist uses $LOGIST_JOBS_DIR, else ./jobs).
function __logist_jd
    set -l tokens (commandline -opc)
    set -l n (count $tokens)
    for i in (seq $n)
        switch $tokens[$i]
            case --jobs-dir
                if test $i -lt $n
                    echo --jobs-dir
                    echo $tokens[(math $i + 1)]
                end
            case '--jobs-dir=*'
                echo --jobs-dir
                string replace -- '--jobs-dir=' '' $tokens[$i]
        end
    end
end

# The words typed that are neither flags nor their values: the command
# word, then its arguments.
function __logist_words
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l skip 0
    for t in $tokens
        if test $skip -eq 1
            set skip 0
            continue
        end
        switch $t
            case VALUEFLAGS
                set skip 1
            case '-*'
            case '*'
                echo $t
        end
    end
end

# The ids of the jobs the command can act on now.
function __logist_jobs
    set -l words (__logist_words)
    command logist __jobs --for "$words[1]" (__logist_jd) 2>/dev/null
end

# The checkpoints the job named after the command can be rolled back to.
function __logist_checkpoints
    set -l words (__logist_words)
    if test (count $words) -ge 2
        command logist __checkpoints $words[2] (__logist_jd) 2>/dev/null
    end
end

# True while no command word has been typed yet.
function __logist_needs_command
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l skip 0
    for t in $tokens
        if test $skip -eq 1
            set skip 0
            continue
        end
        switch $t
            case --jobs-dir --format --database-url
                set skip 1
            case '-*'
            case '*'
                return 1
        end
    end
    return 0
end

complete -c logist -f
complete -c logist -l jobs-dir -r -a '(__fish_complete_directories)' -d 'jobs folder'
complete -c logist -l format -x -a 'text json markdown' -d 'output format'
complete -c logist -l database-url -x -d 'cluster mode database'
complete -c logist -s h -l help -d 'show help'
complete -c logist -n __logist_needs_command -l version -d 'print the version'
`, "VALUEFLAGS", strings.Join(valueFlagNames(), " ")))
	for _, c := range complCommands() {
		fmt.Fprintf(&b, "complete -c logist -n __logist_needs_command -a %s -d '%s'\n", c.name, fishText(c.summary))
	}
	for _, c := range complCommands() {
		cond := "__fish_seen_subcommand_from " + c.name
		switch c.arg {
		case argJob, argJobs:
			fmt.Fprintf(&b, "complete -c logist -n '%s' -a '(__logist_jobs)'\n", cond)
		case argFile:
			fmt.Fprintf(&b, "complete -c logist -n '%s' -F\n", cond)
		case argCommand:
			fmt.Fprintf(&b, "complete -c logist -n '%s' -a '%s'\n", cond, strings.Join(commandNames(), " "))
		case argShell:
			fmt.Fprintf(&b, "complete -c logist -n '%s' -a 'bash zsh fish'\n", cond)
		}
		for _, f := range c.flags {
			switch f.Name {
			case "jobs-dir", "format", "database-url", "help":
				continue // global, above
			}
			spec := "-l " + f.Name
			if f.Shorthand != "" {
				spec = "-s " + f.Shorthand + " " + spec
			}
			if takesValue(f) {
				switch v := flagValues(f.Name); v {
				case "dir":
					spec += " -r -a '(__fish_complete_directories)'"
				case "file":
					spec += " -r -F"
				case "checkpoint":
					spec += " -x -a '(__logist_checkpoints)'"
				case "":
					spec += " -x"
				default:
					spec += " -x -a '" + v + "'"
				}
			}
			fmt.Fprintf(&b, "complete -c logist -n '%s' %s -d '%s'\n", cond, spec, fishText(f.Usage))
		}
	}
	return b.String()
}
