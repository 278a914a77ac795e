# bash completion for bib (installed as share/bash-completion/completions/bib)
# Each command's options are those of `bib help COMMAND` (cli/args.c);
# tests/cli/docs.sh checks that every one of them is offered here.
_bib() {
    local cur prev cmd i
    local commands="run asm dis test repl info bench help"
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    cmd=
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        run|asm|dis|test|repl|info|bench|help) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    case $prev in
    --backend) COMPREPLY=($(compgen -W "cpu vulkan cuda auto" -- "$cur")); return ;;
    --trace) COMPREPLY=($(compgen -W "text json" -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "md csv json" -- "$cur")); return ;;
    --fuel|--max-memory|--max-depth|--max-file-size|--threads|--device|--device-timeout|\
    --comm-timeout|--allow-host|--function|--repetitions|--warmup) return ;;
    --deny) COMPREPLY=($(compgen -W "device-code" -- "$cur")); return ;;
    --input|-o|--output) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    esac
    if [ -z "$cmd" ]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "-h --help -V --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        fi
        return
    fi
    # The options of a VM run (cli/args.c's VM_COMMANDS: run, repl, test).
    local vm="--trace --trace=text --trace=json --fuel --max-memory --max-depth --backend
              --device --threads --strict-device --validation --device-timeout
              --deny=device-code --allow-host= --max-file-size -h --help"
    local opts
    case $cmd in
    run) opts="$vm -o --output --input --function --profile --profile=json --comm-timeout" ;;
    asm) opts="-o --output --strip --max-file-size -h --help" ;;
    dis) opts="-o --output --max-file-size -h --help" ;;
    test) opts="$vm --coverage -v --verbose" ;;
    repl) opts="$vm --profile --profile=json" ;;
    info) opts="--json --device --threads --validation -h --help" ;;
    bench) opts="--quick -o --output --input --repetitions --warmup --max-memory --format --backend --device
                 --threads --validation --max-file-size -h --help" ;;
    help) opts="-h --help" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi
    case $cmd in
    run|repl|bench) COMPREPLY=($(compgen -f -X '!*.@(bib|basm)' -- "$cur") $(compgen -d -- "$cur")) ;;
    asm) COMPREPLY=($(compgen -f -X '!*.basm' -- "$cur") $(compgen -d -- "$cur")) ;;
    dis) COMPREPLY=($(compgen -f -X '!*.bib' -- "$cur") $(compgen -d -- "$cur")) ;;
    test) COMPREPLY=($(compgen -f -X '!*.hex' -- "$cur") $(compgen -d -- "$cur")) ;;
    help) COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
    esac
} && complete -F _bib bib
