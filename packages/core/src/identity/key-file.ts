import { mkdir, open, readFile, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { AgentError } from '../errors.js';
import { Identity } from './identity.js';

/** Group or other permission bits: a private key readable by anyone but its owner is refused (like ssh). */
const SHARED_PERMISSIONS = 0o077;

/**
 * Writes the identity's private key as PKCS#8 PEM, creating the file with mode 0600.
 * Refuses to overwrite an existing file: losing a key means losing the agent's address.
 */
export async function saveIdentity(identity: Identity, path: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  let file;
  try {
    file = await open(path, 'wx', 0o600);
  } catch (error) {
    throw new AgentError('INVALID_KEY_FILE', `cannot create key file ${path}: ${(error as Error).message}`, { cause: error });
  }
  try {
    await file.writeFile(identity.exportPrivateKeyPem());
  } finally {
    await file.close();
  }
}

/** Reads an identity from a PEM key file; rejects with an AgentError when it cannot (see docs/security.md for the file's checks). */
export async function loadIdentity(path: string): Promise<Identity> {
  let mode: number;
  let text: string;
  try {
    mode = (await stat(path)).mode;
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new AgentError('INVALID_KEY_FILE', `cannot read key file ${path}: ${(error as Error).message}`, { cause: error });
  }
  if (process.platform !== 'win32' && (mode & SHARED_PERMISSIONS) !== 0) {
    const octal = (mode & 0o777).toString(8);
    throw new AgentError(
      'INVALID_KEY_FILE',
      `key file ${path} is readable by other users (mode ${octal}); run: chmod 600 ${path}`,
    );
  }
  try {
    return Identity.fromPrivateKeyPem(text);
  } catch (error) {
    throw new AgentError('INVALID_KEY_FILE', `key file ${path} does not hold an Ed25519 private key in PEM`, { cause: error });
  }
}

/** Loads the key at `path`, or creates one there on first use. */
export async function loadOrCreateIdentity(path: string): Promise<Identity> {
  try {
    await stat(path);
  } catch {
    const identity = Identity.generate();
    try {
      await saveIdentity(identity, path);
      return identity;
    } catch (error) {
      // Another process created it between our stat and open: use theirs.
      if (!(error instanceof AgentError) || !String(error.message).includes('EEXIST')) throw error;
    }
  }
  return loadIdentity(path);
}
