# bash completion for dlock(1). The commands and options are read from
# `dlock --help` and `dlock COMMAND --help` when completing, so they are
# always this dlock's own.
_dlock() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local prog=${COMP_WORDS[0]} cmd=${COMP_WORDS[1]-} i
    COMPREPLY=()
    if ((COMP_CWORD == 1)); then
        COMPREPLY=($(compgen -W "$("$prog" --help 2>/dev/null |
            sed -n 's/^  \([a-z][a-z]*\)  .*/\1/p') --help" -- "$cur"))
        return
    fi
    # dlock exec|elect [OPTIONS] NAME -- COMMAND...: after --, a command
    if [[ $cmd == exec || $cmd == elect ]]; then
        for ((i = 2; i < COMP_CWORD; i++)); do
            if [[ ${COMP_WORDS[i]} == -- ]]; then
                COMPREPLY=($(compgen -c -- "$cur"))
                return
            fi
        done
    fi
    # dlock demo NAME: the demos its help lists ("demos: a, b (...").
    if [[ $cmd == demo ]] && ((COMP_CWORD == 2)); then
        COMPREPLY=($(compgen -W "$("$prog" demo --help 2>/dev/null |
            sed -n 's/^demos: \([a-z, ]*\).*/\1/p' | tr -d ,) --help" \
            -- "$cur"))
        return
    fi
    # dlock latch ACTION: the actions its help lists ("actions: a, b")
    if [[ $cmd == latch ]] && ((COMP_CWORD == 2)) && [[ $cur != -* ]]; then
        COMPREPLY=($(compgen -W "$("$prog" latch --help 2>/dev/null |
            sed -n 's/^actions: \([a-z, ]*\).*/\1/p' | tr -d ,)" -- "$cur"))
        return
    fi
    # dlock scenario NAME|all: the scenarios its help lists
    if [[ $cmd == scenario ]] && ((COMP_CWORD == 2)) && [[ $cur != -* ]]; then
        COMPREPLY=($(compgen -W "$("$prog" scenario --help 2>/dev/null |
            sed -n '/^scenarios/,/^$/s/^  \([a-z][a-z-]*\)  .*/\1/p') all" \
            -- "$cur"))
        return
    fi
    case $prev in
    --only) # dlock demo pitfalls --only: the recipes its help lists
        COMPREPLY=($(compgen -W "$("$prog" demo pitfalls --help 2>/dev/null |
            sed -n 's/^  \([a-z]*-[a-z-]*\)  .*/\1/p')" -- "$cur"))
        return ;;
    --uri)
        COMPREPLY=($(compgen -W "$("$prog" info 2>/dev/null |
            sed -n 's/^backends: //p' |
            sed 's#\([a-z0-9]*\)#\1://#g; s#etcd://#& etcds://#') redlock://" \
            -- "$cur"))
        compopt -o nospace 2>/dev/null
        return ;;
    --password-file | --svg | --markdown | --from-json)
        COMPREPLY=($(compgen -f -- "$cur"))
        return ;;
    --json)
        if [[ $cmd == bench || $cmd == scenario ]]; then
            COMPREPLY=($(compgen -f -- "$cur"))
            return
        fi ;;
    esac
    if [[ $cur == -* ]]; then
        local sub=()
        # dlock demo NAME --...: that demo's own options
        [[ $cmd == demo && ${COMP_WORDS[2]-} != -* ]] && sub=("${COMP_WORDS[2]}")
        COMPREPLY=($(compgen -W "$("$prog" "$cmd" "${sub[@]}" --help 2>/dev/null |
            grep -oE -- '(^|[ ,])--?[a-zA-Z][a-zA-Z-]*' | tr -d ' ,' | sort -u)" \
            -- "$cur"))
    fi
}
complete -F _dlock dlock
