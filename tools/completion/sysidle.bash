# bash completion for sysidle-vmm, sysidlectl, sysidle-libvirt,
# sysidle-consolidate and sysidle-fleet. The options come from each
# program itself, so they are never out of step with it: from its option
# table (the hidden --list-options of sysidle-vmm and sysidle-libvirt: one
# line per option, "--NAME ARG|- [VALUE]...", with the values of an option
# that takes one of a fixed set), else from its --help; sysidlectl also
# completes its commands and the names of the running VMs.
# tests/tools/test_completion.py checks this against the option tables.

# _sysidle_cached KIND PROG ARG: PROG ARG's output, kept for the shell's
# lifetime (empty when PROG fails).
_sysidle_cached()
{
	local var="_sysidle_${1}_${2//[^A-Za-z0-9]/_}"
	if [[ -z ${!var+set} ]]; then
		printf -v "$var" '%s' "$(LC_ALL=C "$2" "$3" 2>/dev/null)"
	fi
	printf '%s\n' "${!var}"
}

# _sysidle_help PROG: PROG's --help.
_sysidle_help()
{
	_sysidle_cached help "$1" --help
}

# _sysidle_table PROG: PROG's option table (--list-options), or nothing.
_sysidle_table()
{
	_sysidle_cached table "$1" --list-options | grep -- '^--'
}

# _sysidle_options PROG: every long option of the table, else of --help.
_sysidle_options()
{
	if [[ -n $(_sysidle_table "$1") ]]; then
		_sysidle_table "$1" | cut -d' ' -f1
	else
		_sysidle_help "$1" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u
	fi
}

# _sysidle_takes_arg PROG OPTION: whether OPTION takes an argument: its
# table line names one, else the line of --help that defines it shows one
# ("  --opt ARG  text", "  --opt=ARG").
_sysidle_takes_arg()
{
	local line
	if [[ -n $(_sysidle_table "$1") ]]; then
		line=$(_sysidle_table "$1" | grep -m1 -- "^$2 ")
		[[ -n $line && $(cut -d' ' -f2 <<<"$line") != - ]]
		return
	fi
	_sysidle_help "$1" | grep -qE -- "^ +(-[A-Za-z], )?$2[ =][^ ]"
}

# _sysidle_argument PROG OPTION CUR: complete OPTION's argument: the
# values the table gives, else by the option's kind.
_sysidle_argument()
{
	local values
	values=$(_sysidle_table "$1" | grep -m1 -- "^$2 " | cut -s -d' ' -f3-)
	if [[ -n $values ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$values" -- "$3")
		return
	fi
	case $2 in
	--dir | --hooks | --state-dir)
		mapfile -t COMPREPLY < <(compgen -d -- "$3") ;;
	--policy)
		mapfile -t COMPREPLY < <(compgen -W 'pack suspend pack,suspend' -- "$3") ;;
	*)
		mapfile -t COMPREPLY < <(compgen -f -- "$3") ;;
	esac
}

# _sysidle_generic PROG: options, their arguments, then files.
_sysidle_generic()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}

	if ((COMP_CWORD > 1)) && [[ $prev == --* ]] &&
		_sysidle_takes_arg "$1" "$prev"; then
		_sysidle_argument "$1" "$prev" "$cur"
	elif [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$(_sysidle_options "$1")" -- "$cur")
	else
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
	fi
}

_sysidle_vmm() { _sysidle_generic "$1"; }
_sysidle_libvirt() { _sysidle_generic "$1"; }
_sysidle_consolidate() { _sysidle_generic "$1"; }
_sysidle_fleet() { _sysidle_generic "$1"; }

# sysidlectl [OPTION]... COMMAND [NAME]: the commands are the lines of the
# "Commands:" section of --help; a NAME is a running VM's, from
# `sysidlectl list --json` (names with spaces are quoted).
_sysidlectl()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	local i word command="" dir=()

	for ((i = 1; i < COMP_CWORD; i++)); do
		word=${COMP_WORDS[i]}
		case $word in
		--dir) dir=(--dir "${COMP_WORDS[i + 1]}"); ((i++)) ;;
		--dir=*) dir=("$word") ;;
		-*) _sysidle_takes_arg "$1" "$word" && ((i++)) ;;
		*) command=$word; break ;;
		esac
	done
	if [[ $prev == --* ]] && _sysidle_takes_arg "$1" "$prev"; then
		_sysidle_argument "$1" "$prev" "$cur"
	elif [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$(_sysidle_options "$1")" -- "$cur")
	elif [[ -z $command ]]; then
		local commands
		commands=$(_sysidle_help "$1" |
			sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\).*/\1/p')
		mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
	else
		local name names=()
		while IFS= read -r name; do
			[[ $name == "$cur"* ]] && names+=("$(printf '%q' "$name")")
		done < <("$1" "${dir[@]}" --timeout 1 list --json 2>/dev/null |
			sed -n 's/.*"name": *"\(\([^"\\]\|\\.\)*\)".*/\1/p')
		COMPREPLY=("${names[@]}")
	fi
}

complete -F _sysidle_vmm sysidle-vmm
complete -F _sysidle_libvirt sysidle-libvirt
complete -F _sysidle_consolidate sysidle-consolidate
complete -F _sysidle_fleet sysidle-fleet
complete -F _sysidlectl sysidlectl
