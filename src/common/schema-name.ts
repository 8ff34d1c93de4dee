/**
 * The PostgreSQL schema names Magpie accepts: plain identifiers. The name goes into
 * `search_path` and `CREATE SCHEMA` between double quotes as it is, so it must hold nothing that
 * needs escaping, and a name past 63 characters would be cut short by the server and name
 * another schema than the one written. One rule for the config file, the environment, the
 * `--schema` flag and the connection settings, so `config check` refuses what a connection would.
 */
const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/;

/** What a schema name may be, for messages that refuse one. */
export const SCHEMA_NAME_RULE = 'letters, digits and underscores (at most 63), starting with a letter or underscore, not with pg_';

export function isSchemaName(text: string): boolean {
  // PostgreSQL keeps names starting with pg_ for its own schemas and refuses to create one.
  return SCHEMA_NAME.test(text) && !text.startsWith('pg_');
}

/**
 * Why `text` is not a schema name ("is 64 characters long; ..."), or undefined when it is one.
 * A name too long to read at a glance is described by its length instead of being quoted.
 */
export function schemaNameProblem(text: string): string | undefined {
  if (isSchemaName(text)) return undefined;
  if (text.length > 63) return `is ${text.length} characters long; use ${SCHEMA_NAME_RULE}`;
  if (text.startsWith('pg_')) return `${JSON.stringify(text)} starts with pg_, which PostgreSQL keeps for its own schemas; choose another name`;
  return `${JSON.stringify(text)} is not a plain identifier; use ${SCHEMA_NAME_RULE}`;
}
