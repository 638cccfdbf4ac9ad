# shellcheck shell=bash
# Sourced by tests/cli/test_cli.sh: how a lock held by `dlock exec` is lost
# on mysql://. mode=insert is a lease: the default (SIGSTOP the holder past
# its lease, let another take the row, SIGCONT) fits it. for_update and
# get_lock live as long as the holder's connection, so the server kills
# that connection, as a DBA would: the process's TCP connections to the
# server are found in /proc, matched to server threads by client port in
# information_schema.PROCESSLIST, and KILLed with the admin account.

# Keep the default under another name for mode=insert.
eval "default_$(declare -f lose_lock)"

# Client ports of PID's TCP connections to 127.0.0.1:PORT, one per line.
mysql_client_ports() { # PID PORT
    local pid=$1 want l inodes=" "
    want=$(printf '%04X' "$2")
    for l in /proc/"$pid"/fd/*; do
        l=$(readlink "$l" 2>/dev/null) || continue
        [[ $l == socket:\[*\] ]] && inodes+="${l//[^0-9]/} "
    done
    # sl local rem st txrx trtm retr uid timeout inode ...
    local _sl local rem _st _q _t _r _u _to inode _rest
    while read -r _sl local rem _st _q _t _r _u _to inode _rest; do
        [[ ${rem##*:} == "$want" && $inodes == *" $inode "* ]] || continue
        echo $((16#${local##*:}))
    done < <(tail -n +2 /proc/"$pid"/net/tcp)
}

mysql_admin() { # SQL
    local a=${DLOCK_TEST_MYSQL_ADMIN_URI#*://} user pw hp port
    user=${a%%:*}
    a=${a#*:}
    pw=${a%%@*}
    hp=${a#*@}
    hp=${hp%%/*}
    port=${hp##*:}
    mariadb --no-defaults --protocol=tcp -h 127.0.0.1 -P "$port" -u "$user" \
        "-p$pw" -N -B -e "$1"
}

lose_lock() { # NAME PID
    case "$uri" in
    *mode=for_update* | *mode=get_lock*) ;;
    *)
        default_lose_lock "$@"
        return
        ;;
    esac
    local port hosts="" p id ids
    port=$(printf '%s' "$uri" | sed -E 's#.*@127\.0\.0\.1:([0-9]+)/.*#\1#')
    for p in $(mysql_client_ports "$2" "$port"); do
        hosts+="${hosts:+,}'127.0.0.1:$p'"
    done
    if [ -z "$hosts" ]; then
        echo "lose_lock: no connection of pid $2 to port $port" >&2
        return 1
    fi
    ids=$(mysql_admin "SELECT ID FROM information_schema.PROCESSLIST WHERE HOST IN ($hosts)")
    for id in $ids; do
        mysql_admin "KILL CONNECTION $id" || true
    done
}
