import type { SqlClient } from '../storage/sql-client.js';
import type { MemoryDialect } from './dialect.js';
import { blobToVector, dot, normalizeInPlace } from './embedder.js';
import type { VectorIndexManager } from './index-manager.js';
import { ItemRows, padded, type ItemRow } from './item-rows.js';
import type { Visibility } from './scope.js';
import { nearness, namedTime, timesOf, type TimeSpan } from './query-time.js';
import { onlyQuestion } from './search-text.js';
import { TextCandidates, type TextMatch } from './text-candidates.js';
import { resultWindows, type RankedHit } from './result-windows.js';
import type { MemoryKind, MemoryType, SearchResult } from './types.js';

/** Knobs of the fusion, chosen on LoCoMo evidence recall (see the memory benchmarks). */
export interface SearchTuning {
  /** Candidates taken from each list (vector, full text) before fusion. */
  candidates: number;
  /** The k of reciprocal rank fusion: 1 / (k + rank). */
  rrfK: number;
  vectorWeight: number;
  textWeight: number;
  /** Messages brought along on each side of a transcript hit (same channel, in order). */
  neighbors: number;
  /** Most messages a transcript result shows once later hits inside its window have widened it. */
  windowCap: number;
  /** Cosine below which a vector match counts as no evidence at all. */
  semanticFloor: number;
  /** Cosine at which a vector match counts as full evidence. */
  semanticCeiling: number;
  /** BM25 strength (negated bm25()) at which full-text evidence counts one half. */
  lexicalHalf: number;
  /**
   * Most postings the full-text query may walk: BM25 costs time per matching row, so the rarest
   * query terms are kept until their document counts reach this, and commoner ones are left to
   * the vector side. The rarest term is always kept; when even it matches more rows than this
   * in the caller's scope, only the newest this many of them are ranked.
   */
  textPostingBudget: number;
  /** Full-text hits (best first) whose vectors move the query vector before the vector search. */
  feedbackHits: number;
  /** How far they move it: the weight of their mean against the query's own vector (0: not at all). */
  feedbackWeight: number;
  /** Vector neighbours less similar than this do not enter the fusion (noise of a hashed space). */
  vectorMinSimilarity: number;
  /** `rrf`: order by fused rank; `score`: order by the evidence score (which includes the rank). */
  order: 'rrf' | 'score';
  /** Weight of the fused rank inside the score (the rest is raw evidence). */
  rankShare: number;
  /** Hits scoring below this carry no evidence worth a reader's attention and are left out. */
  minScore: number;
  /**
   * When no word of the query occurs in anything the caller can see, a vector neighbour must be
   * at least this similar to be shown: otherwise the nearest of unrelated texts would come back
   * as if they answered (a nonsense query gets an empty list, not the least-bad noise).
   */
  vectorOnlySimilarity: number;
  /** Fused rank is raised by up to this share for a message at (or about) the time the query names. */
  timeBoost: number;
  /** Days outside the named time over which that raise fades out. */
  timeSlackDays: number;
}

export const DEFAULT_SEARCH_TUNING: Readonly<SearchTuning> = Object.freeze({
  candidates: 50,
  rrfK: 60,
  vectorWeight: 1,
  textWeight: 1,
  neighbors: 2,
  windowCap: 9,
  semanticFloor: 0.2,
  semanticCeiling: 0.8,
  lexicalHalf: 6,
  order: 'rrf',
  vectorMinSimilarity: 0,
  feedbackHits: 3,
  feedbackWeight: 0,
  textPostingBudget: 1000,
  rankShare: 0.5,
  minScore: 0.02,
  vectorOnlySimilarity: 0.5,
  timeBoost: 1,
  timeSlackDays: 3,
});

export interface HybridSearchRequest {
  queryText: string;
  /** Absent when the embedder is down: the search is full-text only (what was said stays findable). */
  queryVector?: Float32Array;
  visibility: Visibility;
  limit: number;
  kind?: MemoryKind;
  memoryType?: MemoryType;
  /** Exact similarities of visible items the vector indexes cannot see yet (their vector is owed). */
  extraVectorHits?: Array<{ label: number; similarity: number }>;
  /**
   * Of these labels, those whose vector is owed: a vector index may still hold one made from
   * their text before an edit, which must neither find them nor score them.
   */
  owedAmong?: (labels: readonly number[]) => Promise<ReadonlySet<number>>;
  /** What "yesterday" or "last week" in the query is relative to (default: the system clock). */
  now?: number;
  /** The channel searched from: a query naming only a time lists that channel's messages of then. */
  channelId?: string;
}


interface Candidate {
  label: number;
  rrf: number;
  similarity?: number;
  lexical?: number;
  /** How near the time the query names (0–1), for a query that names nothing else. */
  timely?: number;
}

/** Words of a time relative to when the query is asked. */
const RELATIVE_TIME = /\b(?:yesterday|today|ago|last)\b/i;

/** Evidence of a message that matches only the time a query names: it was said then, nothing more. */
const TIME_ONLY_EVIDENCE = 0.5;


/**
 * Vector neighbours and BM25 matches, each already restricted to what the caller may see and
 * to the requested kind and type, fused by reciprocal rank. The score reports the evidence
 * behind a hit (cosine and BM25, each mapped to [0, 1] and combined as independent signals),
 * weighted by its fused rank, so text sharing neither words nor meaning with the query scores ~0.
 */
export class HybridSearch {
  private readonly text: TextCandidates;
  private readonly rows: ItemRows;

  constructor(
    private readonly db: SqlClient,
    dialect: MemoryDialect,
    private readonly indexes: VectorIndexManager,
    private readonly tuning: SearchTuning,
  ) {
    this.rows = new ItemRows(db, dialect);
    this.text = new TextCandidates(dialect.fullText(db), this.rows, tuning.textPostingBudget);
  }

  async run(request: HybridSearchRequest): Promise<SearchResult[]> {
    const tuning = this.tuning;
    const candidateCount = Math.max(tuning.candidates, request.limit * 3);
    const named = namedTime(request.queryText, request.now ?? Date.now());
    const time = named?.span;
    // A month of any year ("in June") is no stretch to list, and stays a word to match.
    const stretch = time && !('month' in time) ? time : undefined;
    const phrase = named ? request.queryText.slice(named.from, named.to) : '';
    const rest = named ? `${request.queryText.slice(0, named.from)} ${request.queryText.slice(named.to)}` : request.queryText;
    // A query naming a time and nothing else lists what was said then.
    if (stretch && onlyQuestion(rest)) return this.timeListing(request, stretch, candidateCount);
    // A date says when, not what: "deploy on 3 October 2023" looks for "deploy" near that day,
    // not for every message with a 3 in it. Relative words stay: a message about that day
    // often says "yesterday" or "last week" itself (its own time for them is read apart).
    const topicText = stretch && !RELATIVE_TIME.test(phrase) ? rest : request.queryText;
    const { hits: textHits, offTopic } = await this.textCandidates(request, topicText, candidateCount, phrase);
    if (offTopic) return [];
    const vectorFloor = textHits.length === 0 ? Math.max(tuning.vectorMinSimilarity, tuning.vectorOnlySimilarity) : tuning.vectorMinSimilarity;
    // Cosines to the query itself already at hand: rows whose vectors are still owed (compared by
    // the caller's backlog scan, nothing to read later) and the rows feedback reads.
    const known = new Map((request.extraVectorHits ?? []).map((hit) => [hit.label, hit.similarity]));
    const vectorQuery = request.queryVector && (await this.withFeedback(request.queryVector, textHits, known));
    const vectorHits = (vectorQuery ? await this.vectorCandidates(request, vectorQuery, candidateCount) : []).filter(
      (hit) => hit.similarity >= vectorFloor,
    );

    const candidates = new Map<number, Candidate>();
    const candidate = (label: number): Candidate => {
      let found = candidates.get(label);
      if (!found) {
        found = { label, rrf: 0 };
        candidates.set(label, found);
      }
      return found;
    };
    vectorHits.forEach((hit, rank) => {
      const entry = candidate(hit.label);
      entry.rrf += tuning.vectorWeight / (tuning.rrfK + rank + 1);
      // Evidence is the cosine to the query itself, read later, not to the query moved by feedback.
      if (vectorQuery === request.queryVector) entry.similarity = hit.similarity;
    });
    textHits.forEach((hit, rank) => {
      const entry = candidate(hit.label);
      entry.rrf += tuning.textWeight / (tuning.rrfK + rank + 1);
      entry.lexical = hit.strength;
    });
    for (const entry of candidates.values()) if (entry.similarity === undefined && known.has(entry.label)) entry.similarity = known.get(entry.label);
    if (time) await this.applySignals(candidates, time);
    return this.shown(candidates, request);
  }

  private shown(candidates: Map<number, Candidate>, request: HybridSearchRequest): Promise<SearchResult[]> {
    const tuning = this.tuning;
    return resultWindows(this.rows, this.hitsInOrder(candidates, request), {
      limit: request.limit,
      neighbors: tuning.neighbors,
      windowCap: tuning.windowCap,
      minScore: tuning.minScore,
      admits: (row) => this.admits(row, request),
    });
  }

  /**
   * A query that names a time and nothing else ("what did we talk about yesterday"): the
   * channel's messages written then (or, for a search of memories, the memories saved then),
   * newest first. Neither list has anything to match, and the nearest vectors to "yesterday"
   * are noise.
   */
  private async timeListing(request: HybridSearchRequest, span: { start: number; end: number }, count: number): Promise<SearchResult[]> {
    const { visibility } = request;
    const memories = request.kind === 'memory' || request.memoryType !== undefined;
    if (!memories && !request.channelId) return [];
    // Messages: the (channel_id, kind, created_at) index serves the range, the scope still
    // applies. Memories: few per scope, read through the scope's key.
    const where = memories
      ? `i.kind = 'memory'${request.memoryType ? ' AND i.memory_type = ?' : ''}`
      : `i.channel_id = ? AND i.kind = 'transcript'`;
    const whereParams = memories ? (request.memoryType ? [request.memoryType] : []) : [request.channelId];
    const rows = (await this.db
      .prepare(
        `SELECT i.rowid AS label FROM memory_items i
         WHERE ${where} AND i.created_at >= ? AND i.created_at < ? AND ${visibility.sql}
         ORDER BY i.created_at DESC, i.rowid DESC LIMIT ?`,
      )
      .all(...whereParams, span.start, span.end, ...visibility.params, count)) as Array<{ label: number }>;
    const candidates = new Map<number, Candidate>();
    rows.forEach((row, rank) => {
      candidates.set(row.label, { label: row.label, rrf: this.tuning.textWeight / (this.tuning.rrfK + rank + 1), similarity: 0, timely: 1 });
    });
    return this.shown(candidates, request);
  }

  private textCandidates(request: HybridSearchRequest, text: string, count: number, timeWords: string): Promise<TextMatch> {
    return this.text.find(
      text,
      timeWords,
      {
        visibility: request.visibility,
        ...(request.kind ? { kind: request.kind } : {}),
        ...(request.memoryType ? { memoryType: request.memoryType } : {}),
      },
      count,
    );
  }

  /**
   * The candidates in the order shown, a slice at a time. Ordered by fused rank, a slice needs
   * the exact cosines of its own full-text-only candidates alone (a tie in fused rank is never
   * cut, since the score breaks it), so the cosines of candidates never reached are not read.
   */
  private async *hitsInOrder(candidates: Map<number, Candidate>, request: HybridSearchRequest): AsyncGenerator<RankedHit[]> {
    const tuning = this.tuning;
    const bestRrf = (tuning.vectorWeight + tuning.textWeight) / (tuning.rrfK + 1);
    const byRrf = [...candidates.values()].sort((left, right) => right.rrf - left.rrf);
    const slice = tuning.order === 'rrf' ? Math.max(16, request.limit * 2) : byRrf.length;
    for (let start = 0; start < byRrf.length; ) {
      let end = Math.min(byRrf.length, start + slice);
      while (end < byRrf.length && byRrf[end]!.rrf === byRrf[end - 1]!.rrf) end += 1;
      const entries = byRrf.slice(start, end);
      if (request.queryVector) await this.fillSimilarities(entries, request.queryVector);
      yield entries
        .map((entry) => ({ entry, score: this.score(entry, bestRrf) }))
        .sort((left, right) =>
          tuning.order === 'rrf'
            ? right.entry.rrf - left.entry.rrf || right.score - left.score
            : right.score - left.score || right.entry.rrf - left.entry.rrf,
        )
        .map(({ entry, score }) => ({ label: entry.label, score }));
      start = end;
    }
  }

  private score(entry: Candidate, bestRrf: number): number {
    const tuning = this.tuning;
    const semantic = Math.min(
      1,
      Math.max(0, ((entry.similarity ?? 0) - tuning.semanticFloor) / (tuning.semanticCeiling - tuning.semanticFloor)),
    );
    const lexical = entry.lexical === undefined ? 0 : entry.lexical / (entry.lexical + tuning.lexicalHalf);
    const timely = (entry.timely ?? 0) * TIME_ONLY_EVIDENCE;
    const evidence = 1 - (1 - semantic) * (1 - lexical) * (1 - timely);
    return Math.min(1, Math.max(0, evidence * (1 - tuning.rankShare + tuning.rankShare * Math.min(1, entry.rrf / bestRrf))));
  }

  private async vectorCandidates(
    request: HybridSearchRequest,
    queryVector: Float32Array,
    count: number,
  ): Promise<Array<{ label: number; similarity: number }>> {
    const { visibility } = request;
    const hits: Array<{ label: number; similarity: number }> = [];
    const memoriesOnly = request.kind === 'memory' || request.memoryType !== undefined;
    if (memoriesOnly) {
      // Typed memories are few per scope: an exact scan is both exact and fast. Those whose
      // vector is owed (just rewritten) have none stored: the backlog's similarities speak for them.
      hits.push(...(await this.exactMemoryScan(request, queryVector, visibility.sql, visibility.params)));
      hits.push(...(request.extraVectorHits ?? []));
    } else {
      let filter: ((label: number) => boolean) | undefined;
      if (request.kind === 'transcript') {
        const memoryLabels = new Set(
          (
            (await this.db
              .prepare(`SELECT rowid FROM memory_items WHERE index_key IN (${visibility.keys.map(() => '?').join(', ')}) AND kind = 'memory'`)
              .all(...visibility.keys)) as { rowid: number }[]
          ).map((row) => row.rowid),
        );
        filter = (label) => !memoryLabels.has(label);
      }
      const indexed: Array<{ label: number; similarity: number }> = [];
      for (const key of visibility.keys) indexed.push(...(await this.indexes.search(key, queryVector, count, filter)));
      // An index (this process's, or one loaded from a file) keeps an edited item's old vector
      // until the new one is made: an owed item is found by its exact similarity alone.
      const owed = request.owedAmong && indexed.length > 0 ? await request.owedAmong(indexed.map((hit) => hit.label)) : undefined;
      for (const hit of indexed) if (!owed?.has(hit.label)) hits.push(hit);
      for (const hit of request.extraVectorHits ?? []) if (!filter || filter(hit.label)) hits.push(hit);
      if (visibility.wider.kind !== 'none' && request.kind !== 'transcript') {
        hits.push(...(await this.exactMemoryScan(request, queryVector, visibility.widerSql, visibility.widerParams)));
      }
    }
    // A row can come from two places (the backlog scanned it, then its vector was written and
    // the index found it): it counts once in the list, with its better cosine.
    const best = new Map<number, { label: number; similarity: number }>();
    for (const hit of hits) if ((best.get(hit.label)?.similarity ?? -Infinity) < hit.similarity) best.set(hit.label, hit);
    return [...best.values()].sort((left, right) => right.similarity - left.similarity).slice(0, count);
  }

  private async exactMemoryScan(
    request: HybridSearchRequest,
    queryVector: Float32Array,
    scopeSql: string,
    scopeParams: unknown[],
  ): Promise<Array<{ label: number; similarity: number }>> {
    const typeSql = request.memoryType ? ' AND i.memory_type = ?' : '';
    const rows = (await this.db
      .prepare(
        `SELECT v.item_rowid AS label, v.vector FROM memory_vectors v JOIN memory_items i ON i.rowid = v.item_rowid
         WHERE ${scopeSql} AND i.kind = 'memory'${typeSql}`,
      )
      .all(...scopeParams, ...(request.memoryType ? [request.memoryType] : []))) as Array<{ label: number; vector: Buffer }>;
    return rows.map((row) => ({ label: row.label, similarity: dot(queryVector, blobToVector(row.vector)) }));
  }

  /**
   * Raises the fused rank of messages written at (or speaking of) the time the query names: a
   * message saying "yesterday" counts for the day before it was written.
   */
  private async applySignals(candidates: Map<number, Candidate>, span: TimeSpan): Promise<void> {
    const rows = await this.rows.load([...candidates.keys()]);
    for (const [label, entry] of candidates) {
      const row = rows.get(label);
      if (!row) continue;
      const near = Math.max(...timesOf(row.content, row.created_at).map((moment) => nearness(span, moment, this.tuning.timeSlackDays)));
      entry.rrf *= 1 + this.tuning.timeBoost * near;
    }
  }

  /**
   * The query vector moved towards the best full-text hits (Rocchio feedback): a hashed vector
   * only knows the query's own words and letters, while the messages those words find also
   * carry the words people used around them, so the vector list reaches messages that say the
   * same thing differently. Without full-text hits the query vector is used as it is.
   */
  private async withFeedback(
    queryVector: Float32Array,
    textHits: ReadonlyArray<{ label: number }>,
    known: Map<number, number>,
  ): Promise<Float32Array> {
    const { feedbackHits, feedbackWeight } = this.tuning;
    const labels = textHits.slice(0, feedbackHits).map((hit) => hit.label);
    if (feedbackWeight <= 0 || labels.length === 0) return queryVector;
    const vectors = await this.storedVectors(labels);
    // Read once: these hits' own cosines need no second read.
    for (const [label, vector] of vectors) known.set(label, dot(queryVector, vector));
    if (vectors.size === 0) return queryVector;
    const moved = Float32Array.from(queryVector);
    const share = feedbackWeight / vectors.size;
    for (const vector of vectors.values()) for (let index = 0; index < moved.length; index += 1) moved[index]! += share * (vector[index] ?? 0);
    return normalizeInPlace(moved);
  }

  /** Full-text-only candidates get their exact cosine too, so their evidence is complete. */
  private async fillSimilarities(entries: readonly Candidate[], queryVector: Float32Array): Promise<void> {
    const candidates = new Map(entries.map((entry) => [entry.label, entry]));
    const missing = entries.filter((entry) => entry.similarity === undefined).map((entry) => entry.label);
    if (missing.length === 0) return;
    for (const [label, vector] of await this.storedVectors(missing)) candidates.get(label)!.similarity = dot(queryVector, vector);
  }

  /** The stored vectors of these rows (a row still owed its vector has none yet). */
  private async storedVectors(labels: readonly number[]): Promise<Map<number, Float32Array>> {
    const list = padded(labels);
    const rows = (await this.db
      .prepare(`SELECT item_rowid AS label, vector FROM memory_vectors WHERE item_rowid IN (${list.map(() => '?').join(', ')})`)
      .all(...list)) as Array<{ label: number; vector: Buffer }>;
    return new Map(rows.map((row) => [row.label, blobToVector(row.vector)]));
  }

  private async admits(row: ItemRow, request: HybridSearchRequest): Promise<boolean> {
    if (request.kind && row.kind !== request.kind) return false;
    if (request.memoryType && row.memory_type !== request.memoryType) return false;
    return request.visibility.allows(row);
  }
}
