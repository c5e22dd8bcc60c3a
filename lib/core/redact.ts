/** Strips `user:password@` from anything URL-shaped, so no credential reaches an error or a log. */
export function redactCredentials(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)[^@/\s]*@/gi, '$1');
}
