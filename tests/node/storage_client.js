#!/usr/bin/env node
// The official, unmodified Node client of Cloud Storage (@google-cloud/storage,
// pinned in package-lock.json) against a running stokerd's JSON API. Run by
// tests/e2e/test_node_clients.py; by hand:
//
//   STOKER_TOKEN=$(cat DATA/token) node tests/node/storage_client.js --url http://127.0.0.1:PORT
//
// It creates, reads, lists (prefixes, pages), uploads (multipart, resumable),
// downloads (checked by the client's own CRC-32C/MD5 validation), patches,
// copies, composes and deletes buckets and objects, with generation
// preconditions, checking each answer with node:assert; it prints one JSON
// summary on stdout and exits 0, or prints what did not match and exits 1.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const {Storage} = require('@google-cloud/storage');
const {OAuth2Client} = require('google-auth-library');

function options() {
  const o = {url: process.env.STOKER_URL, bucket: process.env.STOKER_BUCKET || 'node-client-bucket'};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in o) || i + 1 >= argv.length) {
      throw new Error(`usage: storage_client.js --url URL [--bucket NAME]; bad argument ${argv[i]}`);
    }
    o[key] = argv[i + 1];
  }
  o.token = process.env.STOKER_TOKEN;
  if (!o.url) throw new Error('missing --url');
  if (!o.token) throw new Error('missing STOKER_TOKEN in the environment');
  return o;
}

// What went on the wire for uploads (method, uploadType, Content-Range):
// the client talks to stokerd through this small HTTP relay, which notes
// each upload request and passes every request and answer on unchanged.
const uploads = [];
function startRelay(target) {
  const t = new URL(target);
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://relay');
    if (u.pathname.startsWith('/upload/')) {
      uploads.push({method: req.method, uploadType: u.searchParams.get('uploadType'),
                    contentRange: req.headers['content-range'],
                    chunked: req.headers['transfer-encoding'] === 'chunked'});
    }
    const up = http.request({host: t.hostname, port: t.port, method: req.method, path: req.url,
                             headers: req.headers}, answer => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    up.on('error', e => res.destroy(e));
    req.pipe(up);
  });
  return new Promise(resolve => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// The HTTP status of a call that must fail.
async function failure(what, call) {
  try {
    await call();
  } catch (e) {
    return {code: e.code, message: String(e.message).slice(0, 300)};
  }
  assert.fail(`${what} should have failed`);
}

async function main() {
  const o = options();
  const auth = new OAuth2Client();
  auth.setCredentials({access_token: o.token, expiry_date: Date.now() + 3600e3});
  const relay = await startRelay(o.url);
  const storage = new Storage({apiEndpoint: `http://127.0.0.1:${relay.address().port}`, projectId: 'p', authClient: auth,
                               useAuthWithCustomEndpoint: true, retryOptions: {autoRetry: false}});
  // The client's resumable uploads do not pass useAuthWithCustomEndpoint on
  // (7.x and 8.x start them with an unauthenticated client when apiEndpoint
  // is not Google's), so the token also goes in through the client's own
  // request interceptors, which resumable uploads apply (docs/clients.md).
  storage.interceptors.push({
    request: reqOpts => ({...reqOpts, headers: {...(reqOpts.headers || {}), Authorization: `Bearer ${o.token}`}}),
  });
  const step = what => process.stderr.write(`storage_client.js: ${what}\n`);
  const version = JSON.parse(fs.readFileSync(path.join(path.dirname(require.resolve('@google-cloud/storage')),
                                                       '..', '..', '..', 'package.json'))).version;
  const summary = {client: {package: '@google-cloud/storage', version, node: process.version}};

  // Buckets.
  step('createBucket');
  const [bucket] = await storage.createBucket(o.bucket);
  assert.equal(bucket.name, o.bucket);
  summary.createAgain = await failure('creating the bucket again', () => storage.createBucket(o.bucket));
  const [exists] = await bucket.exists();
  const [missing] = await storage.bucket('no-such-bucket-here').exists();
  assert.deepEqual([exists, missing], [true, false]);
  const [bmeta] = await bucket.getMetadata();
  summary.bucket = {id: bmeta.id, kind: bmeta.kind, location: bmeta.location, storageClass: bmeta.storageClass,
                    timeCreated: bmeta.timeCreated};
  const [buckets] = await storage.getBuckets();
  summary.bucketNames = buckets.map(b => b.name);

  // A multipart upload (resumable: false), with a content type and metadata.
  step('save (multipart)');
  const small = bucket.file('notes/hello.txt');
  await small.save('hello from node', {resumable: false, contentType: 'text/plain',
                                       metadata: {metadata: {owner: 'node', step: '1'}}});
  const [smeta] = await small.getMetadata();
  summary.multipart = {contentType: smeta.contentType, metadata: smeta.metadata, size: smeta.size,
                       generation: smeta.generation, metageneration: smeta.metageneration};
  const [smallBytes] = await small.download();
  assert.equal(smallBytes.toString(), 'hello from node');

  // A resumable upload (the client's default), one streaming request.
  step('save (resumable)');
  const big = Buffer.alloc(3 * 1024 * 1024 + 17);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7919) % 251;
  const large = bucket.file('data/big.bin');
  await large.save(big, {contentType: 'application/x-test'});
  const [largeBytes] = await large.download();  // the client checks CRC-32C and MD5
  assert.ok(largeBytes.equals(big), 'the resumable upload read back different bytes');
  const [lmeta] = await large.getMetadata();
  summary.resumable = {contentType: lmeta.contentType, size: lmeta.size};

  // bucket.upload of a local file, and a ranged download.
  step('bucket.upload');
  const local = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'stoker-node-')), 'trainer.tar.gz');
  fs.writeFileSync(local, Buffer.from('not really a tarball, but bytes'));
  const [uploaded] = await bucket.upload(local, {destination: 'packages/trainer.tar.gz'});
  const [part] = await uploaded.download({start: 4, end: 9});
  summary.ranged = part.toString();

  // Listing: prefixes with a delimiter, and pages.
  step('getFiles');
  for (const name of ['a/1', 'a/2', 'a/3', 'b/1', 'top']) await bucket.file(name).save(name, {resumable: false});
  const [topFiles, , topApi] = await bucket.getFiles({delimiter: '/', autoPaginate: false});
  summary.delimited = {items: topFiles.map(f => f.name), prefixes: topApi.prefixes};
  const paged = [];
  let query = {maxResults: 2, autoPaginate: false};
  let pages = 0;
  while (query) {
    const [files, next] = await bucket.getFiles(query);
    paged.push(...files.map(f => f.name));
    query = next;
    pages += 1;
    assert.ok(pages < 20, 'paging does not end');
  }
  const [all] = await bucket.getFiles();
  summary.paged = {pages, names: paged, all: all.map(f => f.name)};
  const [under] = await bucket.getFiles({prefix: 'a/'});
  summary.prefixed = under.map(f => f.name);

  // Preconditions.
  step('preconditions');
  summary.ifGenerationMatch0 = await failure('writing over an object with ifGenerationMatch=0',
    () => small.save('overwritten', {resumable: false, preconditionOpts: {ifGenerationMatch: 0}}));
  summary.staleDelete = await failure('deleting with a stale generation',
    () => bucket.file('top').delete({ifGenerationMatch: 12345}));
  const [topMeta] = await bucket.file('top').getMetadata();
  await bucket.file('top').delete({ifGenerationMatch: topMeta.generation});
  const [topGone] = await bucket.file('top').exists();
  summary.deletedWithGeneration = !topGone;

  // Metadata patch.
  step('setMetadata');
  const [patched] = await small.setMetadata({contentType: 'text/markdown', metadata: {step: '2', extra: 'x'}});
  summary.patched = {contentType: patched.contentType, metadata: patched.metadata,
                     metageneration: patched.metageneration, generation: patched.generation};
  summary.staleMetageneration = await failure('a patch with a stale metageneration',
    () => small.setMetadata({metadata: {step: '3'}}, {ifMetagenerationMatch: 1}));

  // Copy (rewrite) and compose.
  step('copy, combine');
  const [copied] = await small.copy(bucket.file('copies/hello.txt'));
  const [cmeta] = await copied.getMetadata();
  const [copiedBytes] = await copied.download();
  summary.copy = {contentType: cmeta.contentType, metadata: cmeta.metadata, bytes: copiedBytes.toString()};
  const [combined] = await bucket.combine([bucket.file('a/1'), bucket.file('a/2'), bucket.file('b/1')], 'combined.txt');
  const [combinedBytes] = await combined.download();
  summary.combined = combinedBytes.toString();

  // Deleting: a bucket with objects is refused; empty, it goes.
  step('delete');
  summary.deleteNonEmpty = await failure('deleting a bucket with objects', () => bucket.delete());
  await bucket.deleteFiles();
  await bucket.delete();
  const [after] = await bucket.exists();
  summary.bucketDeleted = !after;
  summary.uploads = uploads;
  relay.close();
  process.stdout.write(JSON.stringify(summary) + '\n');
}

main().catch(e => {
  process.stderr.write(`storage_client.js: ${e.stack || e}\n`);
  process.exit(1);
});
