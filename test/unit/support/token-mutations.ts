// Edits of a genuine flavor token, for the fuzz test and the fuzz benchmark alike: a forger who
// holds a valid token and changes it a little must still get nothing.

export interface TokenEdit {
  /** replace, insert or delete the character at `at`, swap it with the next, or (anything else) upper-case it. */
  kind: string;
  at: number;
  char: string;
}

export function applyEdit(token: string, e: TokenEdit): string {
  const at = Math.min(e.at, Math.max(0, token.length - 1));
  switch (e.kind) {
    case 'replace':
      return token.slice(0, at) + e.char + token.slice(at + 1);
    case 'insert':
      return token.slice(0, at) + e.char + token.slice(at);
    case 'delete':
      return token.slice(0, at) + token.slice(at + 1);
    case 'swap':
      return at + 1 < token.length
        ? token.slice(0, at) + token[at + 1] + token[at] + token.slice(at + 2)
        : token;
    default:
      return token.slice(0, at) + (token[at] ?? '').toUpperCase() + token.slice(at + 1);
  }
}
