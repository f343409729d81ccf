# Sourced by the interleaved benchmarks (scripts/matrix.sh, scripts/workloads.sh).
# round_order ROUND NAME...: sets the array ORDER to the order the allocators run in, in round
# ROUND (from 1): each round starts one further on, and every other round runs backwards, so
# that no allocator always runs right before or after the same one (a fixed order biased a
# build against the one run right before it by up to 4 %).
round_order() {
    local r=$1 i j t k
    shift
    k=$(((r - 1) % $#))
    ORDER=("${@:k+1}" "${@:1:k}")
    if ((r % 2 == 0)); then
        for ((i = 0, j = ${#ORDER[@]} - 1; i < j; i++, j--)); do
            t=${ORDER[i]}; ORDER[i]=${ORDER[j]}; ORDER[j]=$t
        done
    fi
}
