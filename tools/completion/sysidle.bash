# bash completion for sysidle-vmm, sysidlectl, sysidle-libvirt,
# sysidle-consolidate and sysidle-fleet. The options come from each
# program's own --help, so they are never out of step with it; sysidlectl
# also completes its commands and the names of the running VMs.

# _sysidle_help PROG: PROG's --help, kept for the shell's lifetime.
_sysidle_help()
{
	local var="_sysidle_help_${1//[^A-Za-z0-9]/_}"
	if [[ -z ${!var+set} ]]; then
		printf -v "$var" '%s' "$(LC_ALL=C "$1" --help 2>/dev/null)"
	fi
	printf '%s\n' "${!var}"
}

# _sysidle_options PROG: every long option --help names.
_sysidle_options()
{
	_sysidle_help "$1" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u
}

# _sysidle_takes_arg PROG OPTION: whether the line of --help that
# defines OPTION shows an argument ("  --opt ARG  text", "  --opt=ARG").
_sysidle_takes_arg()
{
	_sysidle_help "$1" | grep -qE -- "^ +(-[A-Za-z], )?$2[ =][^ ]"
}

# _sysidle_argument OPTION CUR: complete OPTION's argument.
_sysidle_argument()
{
	case $1 in
	--dir | --hooks | --state-dir)
		mapfile -t COMPREPLY < <(compgen -d -- "$2") ;;
	--policy)
		mapfile -t COMPREPLY < <(compgen -W 'pack suspend pack,suspend' -- "$2") ;;
	--vcpu-timers)
		mapfile -t COMPREPLY < <(compgen -W 'self housekeeping' -- "$2") ;;
	--interrupt-injection)
		mapfile -t COMPREPLY < <(compgen -W 'kvm-run ioctl' -- "$2") ;;
	--source)
		mapfile -t COMPREPLY < <(compgen -W 'auto kvm proc libvirt' -- "$2") ;;
	*)
		mapfile -t COMPREPLY < <(compgen -f -- "$2") ;;
	esac
}

# _sysidle_generic PROG: options, their arguments, then files.
_sysidle_generic()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}

	if ((COMP_CWORD > 1)) && [[ $prev == --* ]] &&
		_sysidle_takes_arg "$1" "$prev"; then
		_sysidle_argument "$prev" "$cur"
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
		_sysidle_argument "$prev" "$cur"
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
