/**
 * Edit distance with adjacent transpositions (optimal string alignment): insertions, deletions,
 * substitutions and swapping two neighbouring letters each cost 1, so the commonest typos
 * (`modle`, `serch`, `--hepl`, `stauts`) are one edit away from what was meant.
 */
export function editDistance(left: string, right: string): number {
  if (left === right) return 0;
  let before: number[] = [];
  let previous = Array.from({ length: right.length + 1 }, (_, index) => index);
  for (let row = 1; row <= left.length; row++) {
    const current = [row];
    for (let column = 1; column <= right.length; column++) {
      const substitution = (previous[column - 1] ?? 0) + (left[row - 1] === right[column - 1] ? 0 : 1);
      const deletion = (previous[column] ?? 0) + 1;
      const insertion = (current[column - 1] ?? 0) + 1;
      let best = Math.min(substitution, deletion, insertion);
      if (row > 1 && column > 1 && left[row - 1] === right[column - 2] && left[row - 2] === right[column - 1]) {
        best = Math.min(best, (before[column - 2] ?? 0) + 1);
      }
      current.push(best);
    }
    before = previous;
    previous = current;
  }
  return previous[right.length] ?? 0;
}

/**
 * The candidate closest to `word`, or undefined when none is close enough to be a plausible
 * typo (at most a third of the word's length, and never more than 3 edits).
 */
export function closestMatch(word: string, candidates: Iterable<string>): string | undefined {
  const limit = Math.min(3, Math.max(1, Math.floor(word.length / 3)));
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  const lowered = word.toLowerCase();
  for (const candidate of candidates) {
    // Case and dash/underscore slips (`Context-Window`) count as no distance at all.
    const normalized = candidate.toLowerCase();
    const distance =
      normalized === lowered.replaceAll('-', '_') ? 0 : editDistance(lowered, normalized);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return bestDistance <= limit ? best : undefined;
}

/** `; did you mean 'x'?` for the closest candidate, or '' when none is close. */
export function didYouMean(word: string, candidates: Iterable<string>, quote = "'"): string {
  const guess = closestMatch(word, candidates);
  return guess === undefined ? '' : `; did you mean ${quote}${guess}${quote}?`;
}
