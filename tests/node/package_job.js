#!/usr/bin/env node
// Both official clients together, as a Vertex notebook uses them: the
// Storage client uploads a trainer package, the Vertex client runs a custom
// job from it (pythonPackageSpec) with an output directory in the same
// bucket, and the Storage client reads back the model the trainer wrote to
// AIP_MODEL_DIR. Run by tests/e2e/test_node_clients.py; by hand:
//
//   STOKER_TOKEN=... node tests/node/package_job.js --url http://127.0.0.1:PORT \
//     --package trainer-0.1.tar.gz --image IMAGE
//
// Prints one JSON summary on stdout and exits 0, or says what failed and exits 1.
'use strict';

const assert = require('node:assert/strict');
const path = require('node:path');
const {Storage} = require('@google-cloud/storage');
const {JobServiceClient} = require('@google-cloud/aiplatform').v1;
const {OAuth2Client} = require('google-auth-library');

function options() {
  const o = {url: '', package: '', image: '', bucket: 'node-packages', timeout: '120'};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in o) || i + 1 >= argv.length) {
      throw new Error(`usage: package_job.js --url URL --package FILE --image IMAGE; bad argument ${argv[i]}`);
    }
    o[key] = argv[i + 1];
  }
  o.token = process.env.STOKER_TOKEN;
  for (const k of ['url', 'package', 'image', 'token']) if (!o[k]) throw new Error(`missing ${k}`);
  return o;
}

async function main() {
  const o = options();
  const url = new URL(o.url);
  const auth = new OAuth2Client();
  auth.setCredentials({access_token: o.token, expiry_date: Date.now() + 3600e3});
  const storage = new Storage({apiEndpoint: o.url, projectId: 'p', authClient: auth,
                               useAuthWithCustomEndpoint: true});
  // Resumable uploads need the token through an interceptor (docs/clients.md).
  storage.interceptors.push({
    request: r => ({...r, headers: {...(r.headers || {}), Authorization: `Bearer ${o.token}`}}),
  });
  const jobs = new JobServiceClient({apiEndpoint: url.hostname, port: Number(url.port),
                                     protocol: url.protocol.replace(':', ''), fallback: true,
                                     authClient: auth});

  const [bucket] = await storage.createBucket(o.bucket);
  const object = path.basename(o.package);
  await bucket.upload(o.package, {destination: `packages/${object}`});
  const parent = 'projects/p/locations/us-central1';
  const [job] = await jobs.createCustomJob({parent, customJob: {
    displayName: 'from-the-storage-client',
    jobSpec: {
      workerPoolSpecs: [{
        machineSpec: {machineType: 'n1-standard-4'}, replicaCount: 1,
        pythonPackageSpec: {executorImageUri: o.image,
                            packageUris: [`gs://${o.bucket}/packages/${object}`],
                            pythonModule: 'trainer.task', args: ['--epochs', '3']},
      }],
      baseOutputDirectory: {outputUriPrefix: `gs://${o.bucket}/runs/1`},
    },
  }});
  const end = Date.now() + Number(o.timeout) * 1000;
  let state = job.state;
  let last = job;
  while (!['JOB_STATE_SUCCEEDED', 'JOB_STATE_FAILED', 'JOB_STATE_CANCELLED'].includes(state)) {
    assert.ok(Date.now() < end, `the job is still ${state}`);
    await new Promise(r => setTimeout(r, 100));
    [last] = await jobs.getCustomJob({name: job.name});
    state = last.state;
  }
  const summary = {job: job.name, state, error: last.error || null};
  if (state === 'JOB_STATE_SUCCEEDED') {
    const [files] = await bucket.getFiles({prefix: 'runs/1/'});
    summary.outputs = files.map(f => f.name);
    const [model] = await bucket.file('runs/1/model/model.txt').download();
    summary.model = model.toString();
  }
  process.stdout.write(JSON.stringify(summary) + '\n');
}

main().catch(e => {
  process.stderr.write(`package_job.js: ${e.stack || e}\n`);
  process.exit(1);
});
