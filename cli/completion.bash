# bash completion for bib (installed as share/bash-completion/completions/bib)
_bib() {
    local cur prev cmd i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    cmd=
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        run|asm|dis|test|repl|info|bench) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    case $prev in
    --backend) COMPREPLY=($(compgen -W "cpu vulkan cuda auto" -- "$cur")); return ;;
    --trace) COMPREPLY=($(compgen -W "text json" -- "$cur")); return ;;
    --fuel|--max-memory|--max-depth|--threads|--device|--device-timeout|--comm-timeout|--allow-host) return ;;
    --deny) COMPREPLY=($(compgen -W "device-code" -- "$cur")); return ;;
    -o|--output) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    esac
    if [ -z "$cmd" ]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--help --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "run asm dis test repl info bench" -- "$cur"))
        fi
        return
    fi
    local common="--trace --trace=text --trace=json --fuel --max-memory --max-depth --backend
                  --device --threads --strict-device --validation --device-timeout
                  --deny=device-code --allow-host= --help"
    local opts
    case $cmd in
    run) opts="$common --input --output --profile --profile=json --comm-timeout" ;;
    asm) opts="-o --output" ;;
    dis) opts="" ;;
    test) opts="$common --coverage --verbose -v" ;;
    repl) opts="$common --profile" ;;
    info) opts="--json --threads --device" ;;
    bench) opts="--quick -o --threads --device" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi
    case $cmd in
    run|repl) COMPREPLY=($(compgen -f -X '!*.@(bib|basm)' -- "$cur") $(compgen -d -- "$cur")) ;;
    asm) COMPREPLY=($(compgen -f -X '!*.basm' -- "$cur") $(compgen -d -- "$cur")) ;;
    dis) COMPREPLY=($(compgen -f -X '!*.bib' -- "$cur") $(compgen -d -- "$cur")) ;;
    test) COMPREPLY=($(compgen -f -X '!*.hex' -- "$cur") $(compgen -d -- "$cur")) ;;
    esac
} && complete -F _bib bib
