/** Per-channel personas set from chat, stored in the data directory. */
export { listPersonas, MAX_PERSONA_CHARS, PERSONA_MIGRATIONS, PersonaStore, validatePersona, type Persona } from './persona-store.js';
