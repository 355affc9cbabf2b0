#!/usr/bin/env node
// The official, unmodified Node client of Vertex AI (@google-cloud/aiplatform,
// pinned in package-lock.json) against a running stokerd, over its REST
// transport (`fallback: true`, which sends enums as numbers). Run by
// tests/e2e/test_node_clients.py; by hand:
//
//   STOKER_TOKEN=$(cat DATA/token) node tests/node/aiplatform_client.js \
//     --url http://127.0.0.1:PORT --project p --location l --image IMAGE [--gpu NVIDIA_TESLA_T4]
//
// (each option may also come from the environment: STOKER_URL, STOKER_PROJECT,
// STOKER_LOCATION, STOKER_IMAGE, STOKER_GPU). --gpu names an accelerator the
// daemon has (its config's inventory): a job asking for one must run, and one
// asking for an NVIDIA_A100_80GB, which it must not have, is refused. Without
// --gpu both are refused.
//
// It creates, reads, lists, waits for, cancels and deletes CustomJobs and runs
// and deletes a HyperparameterTuningJob, checking each answer with node:assert;
// it prints one JSON summary on stdout and exits 0, or prints what did not
// match on stderr and exits 1.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const {JobServiceClient} = require('@google-cloud/aiplatform').v1;
const {protos} = require('@google-cloud/aiplatform');
const {OAuth2Client} = require('google-auth-library');

const v1 = protos.google.cloud.aiplatform.v1;

function options() {
  const o = {
    url: process.env.STOKER_URL, project: process.env.STOKER_PROJECT || 'p',
    location: process.env.STOKER_LOCATION || 'l', image: process.env.STOKER_IMAGE,
    gpu: process.env.STOKER_GPU || '', timeout: Number(process.env.STOKER_WAIT_SECONDS || 120),
  };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in o) || i + 1 >= argv.length) {
      throw new Error(`usage: aiplatform_client.js --url URL --project P --location L --image IMAGE ` +
                      `[--gpu TYPE] [--timeout SECONDS]; bad argument ${argv[i]}`);
    }
    o[key] = key === 'timeout' ? Number(argv[i + 1]) : argv[i + 1];
  }
  o.token = process.env.STOKER_TOKEN;
  for (const k of ['url', 'image', 'token']) {
    if (!o[k]) throw new Error(`missing ${k === 'token' ? 'STOKER_TOKEN in the environment' : '--' + k}`);
  }
  return o;
}

// An OAuth2Client holding the daemon's token as its access token, as a user
// would configure it. It also notes each request (method, path, JSON body)
// the client sends through it, so that the summary shows what went on the
// wire; the request is passed on unchanged.
class RecordingAuth extends OAuth2Client {
  constructor() {
    super();
    this.requests = [];
  }
  fetch(url, init) {
    const u = new URL(String(url));
    let body;
    if (init && typeof init.body === 'string') body = JSON.parse(init.body);
    this.requests.push({method: (init && init.method) || 'GET', path: u.pathname, query: u.search, body});
    return super.fetch(url, init);
  }
}

// google.protobuf.Empty, as the client decodes it (a message with no fields).
const assertEmpty = (x, what) => assert.ok(x && typeof x === 'object' && Object.keys(x).length === 0,
                                           `${what} answers Empty, not ${JSON.stringify(x)}`);
const sleep = ms => new Promise(r => setTimeout(r, ms));
const ENDED = ['JOB_STATE_SUCCEEDED', 'JOB_STATE_FAILED', 'JOB_STATE_CANCELLED'];

async function main() {
  const o = options();
  const url = new URL(o.url);
  const auth = new RecordingAuth();
  auth.setCredentials({access_token: o.token, expiry_date: Date.now() + 3600e3});
  const client = new JobServiceClient({
    apiEndpoint: url.hostname, port: Number(url.port), protocol: url.protocol.replace(':', ''),
    fallback: true, authClient: auth,
  });
  const parent = `projects/${o.project}/locations/${o.location}`;
  const deadline = () => Date.now() + o.timeout * 1000;
  const summary = {
    client: {
      package: '@google-cloud/aiplatform',
      version: JSON.parse(fs.readFileSync(path.join(path.dirname(require.resolve('@google-cloud/aiplatform')),
                                                    '..', '..', 'package.json'))).version,
      node: process.version,
    },
    parent,
  };
  const step = what => process.stderr.write(`aiplatform_client.js: ${what}\n`);

  const job = (name, script, machine = {}) => ({
    displayName: name,
    jobSpec: {workerPoolSpecs: [{
      machineSpec: {machineType: 'e2-standard-2', ...machine}, replicaCount: 1,
      containerSpec: {imageUri: o.image, command: ['/bin/sh', '-c', script]},
    }]},
  });
  const lastBody = (method, suffix) => {
    const r = auth.requests.filter(q => q.method === method && q.path.endsWith(suffix)).pop();
    assert.ok(r, `no ${method} .../${suffix} was sent`);
    return r.body;
  };
  // The client's error for a call that must fail: its gRPC code and message.
  const refusal = async (what, call) => {
    try {
      const answer = await call();
      assert.fail(`${what} should have been refused; it answered ${JSON.stringify(answer[0]).slice(0, 300)}`);
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      return {code: e.code, message: e.message};
    }
  };
  async function waitJob(name, states) {
    const end = deadline();
    for (;;) {
      const [j] = await client.getCustomJob({name});
      if (states.includes(j.state)) return j;
      assert.ok(!ENDED.includes(j.state), `${name} ended ${j.state} (${JSON.stringify(j.error)}), expected ${states}`);
      assert.ok(Date.now() < end, `${name} still ${j.state} after ${o.timeout}s, expected ${states}`);
      await sleep(50);
    }
  }
  const nameRe = kind => new RegExp(`^${parent}/${kind}/\\d+$`);

  // 1. Create, get, wait for a plain job.
  step('createCustomJob');
  const [created] = await client.createCustomJob({parent, customJob: job('node-hello', 'echo hello from node')});
  assert.match(created.name, nameRe('customJobs'));
  assert.equal(created.displayName, 'node-hello');
  assert.ok(['JOB_STATE_QUEUED', 'JOB_STATE_PENDING', 'JOB_STATE_RUNNING', 'JOB_STATE_SUCCEEDED'].includes(created.state),
            `created in state ${created.state}`);
  const [got] = await client.getCustomJob({name: created.name});
  assert.equal(got.name, created.name);
  assert.deepEqual(got.jobSpec.workerPoolSpecs[0].containerSpec.command, ['/bin/sh', '-c', 'echo hello from node']);
  assert.equal(got.jobSpec.workerPoolSpecs[0].machineSpec.machineType, 'e2-standard-2');
  step(`waiting for ${created.name}`);
  const hello = await waitJob(created.name, ['JOB_STATE_SUCCEEDED']);
  assert.ok(hello.startTime && hello.endTime, 'a succeeded job has startTime and endTime');
  summary.hello = {name: created.name, createdState: created.state, finalState: hello.state};

  // 2. Accelerators, sent as enum numbers.
  step('createCustomJob with an accelerator');
  const gpuType = o.gpu || 'NVIDIA_TESLA_T4';
  const gpuCall = () => client.createCustomJob({parent, customJob: job('node-gpu', 'echo gpu',
      {acceleratorType: gpuType, acceleratorCount: 1})});
  summary.gpu = {acceleratorType: gpuType};
  if (o.gpu) {
    const [g] = await gpuCall();
    assert.equal(g.jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType, gpuType);
    assert.equal(g.jobSpec.workerPoolSpecs[0].machineSpec.acceleratorCount, 1);
    const gDone = await waitJob(g.name, ['JOB_STATE_SUCCEEDED']);
    assert.equal(gDone.jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType, gpuType);
    Object.assign(summary.gpu, {name: g.name, finalState: gDone.state,
                                answeredAcceleratorType: gDone.jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType});
  } else {
    summary.gpu.refused = await refusal(`a ${gpuType} job on a daemon without one`, gpuCall);
  }
  const sentGpu = lastBody('POST', '/customJobs').jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType;
  assert.equal(sentGpu, v1.AcceleratorType[gpuType], `the client sent acceleratorType ${JSON.stringify(sentGpu)}`);
  summary.gpu.sentAcceleratorType = sentGpu;
  step('createCustomJob with an accelerator the daemon lacks');
  summary.absentGpu = await refusal('a job asking for an NVIDIA_A100_80GB', () => client.createCustomJob({parent,
      customJob: job('node-a100', 'echo no', {acceleratorType: 'NVIDIA_A100_80GB', acceleratorCount: 1})}));
  summary.absentGpu.sentAcceleratorType =
      lastBody('POST', '/customJobs').jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType;
  assert.equal(summary.absentGpu.sentAcceleratorType, v1.AcceleratorType.NVIDIA_A100_80GB);
  assert.equal(summary.absentGpu.code, 3, `INVALID_ARGUMENT expected: ${JSON.stringify(summary.absentGpu)}`);
  assert.match(summary.absentGpu.message, /jobSpec\.workerPoolSpecs\[0\]\.machineSpec\.accelerator/);

  // 3. A long job: delete is refused while it runs; cancel stops it.
  step('createCustomJob (long)');
  const [long] = await client.createCustomJob({parent, customJob: job('node-long', 'sleep 600')});
  await waitJob(long.name, ['JOB_STATE_RUNNING']);
  step('deleteCustomJob while it runs');
  summary.deleteRunning = await refusal('deleting a running job', () => client.deleteCustomJob({name: long.name}));
  assert.equal(summary.deleteRunning.code, 9, `FAILED_PRECONDITION expected: ${JSON.stringify(summary.deleteRunning)}`);
  step('cancelCustomJob');
  const [cancelAnswer] = await client.cancelCustomJob({name: long.name});
  assertEmpty(cancelAnswer, 'cancel');
  const cancelled = await waitJob(long.name, ['JOB_STATE_CANCELLED']);
  assert.equal(cancelled.error && cancelled.error.code, 1, `a cancelled job's error is CANCELLED: ${JSON.stringify(cancelled.error)}`);
  summary.long = {name: long.name, finalState: cancelled.state, errorCode: cancelled.error.code};

  // 4. List, one job a page: the client follows nextPageToken.
  step('listCustomJobs');
  const listed = [];
  for await (const j of client.listCustomJobsAsync({parent, pageSize: 1}, {autoPaginate: false})) listed.push({name: j.name, state: j.state});
  const names = listed.map(j => j.name);
  const mine = [created.name, long.name].concat(summary.gpu.name ? [summary.gpu.name] : []);
  for (const n of mine) assert.ok(names.includes(n), `${n} missing from the list ${JSON.stringify(names)}`);
  assert.equal(new Set(names).size, names.length, `the list repeats a job: ${JSON.stringify(names)}`);
  const listRequests = auth.requests.filter(q => q.method === 'GET' && q.path.endsWith('/customJobs'));
  summary.list = {jobs: listed, pages: listRequests.length,
                  pageTokens: listRequests.filter(q => q.query.includes('pageToken=')).length};
  assert.ok(summary.list.pages >= names.length, `pageSize 1 should need a page per job: ${JSON.stringify(summary.list)}`);

  // 5. Delete an ended job: a long-running operation, already done.
  step('deleteCustomJob');
  const [op] = await client.deleteCustomJob({name: created.name});
  assert.match(op.name, nameRe('operations'));
  assert.equal(op.done, true);
  const [opResult, opMetadata] = await op.promise();
  assertEmpty(opResult, 'the deletion\'s operation');
  assert.ok(opMetadata && opMetadata.genericMetadata && opMetadata.genericMetadata.createTime,
            `DeleteOperationMetadata with genericMetadata.createTime: ${JSON.stringify(opMetadata)}`);
  const checked = await client.checkDeleteCustomJobProgress(op.name);
  assert.equal(checked.name, op.name);
  assert.equal(checked.done, true);
  const [fetched] = await client.getOperation({name: op.name});
  assert.equal(fetched.name, op.name);
  assert.equal(fetched.done, true);
  assert.equal(fetched.metadata.type_url, 'type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata');
  assert.equal(fetched.response.type_url, 'type.googleapis.com/google.protobuf.Empty');
  const gone = await refusal('getCustomJob of a deleted job', () => client.getCustomJob({name: created.name}));
  assert.equal(gone.code, 5, `NOT_FOUND expected: ${JSON.stringify(gone)}`);
  summary.delete = {job: created.name, operation: op.name, done: op.done,
                    metadataType: op.latestResponse.metadata.type_url,
                    responseType: op.latestResponse.response.type_url,
                    getOperationPath: auth.requests.filter(q => q.path.endsWith(op.name)).map(q => q.path),
                    getAfterDelete: gone};

  // 6. A tuning job with enums sent as numbers; it runs, is read back, deleted.
  step('createHyperparameterTuningJob');
  const studySpec = {
    metrics: [{metricId: 'score', goal: 'MAXIMIZE'}],
    parameters: [{parameterId: 'x', scaleType: 'UNIT_LOG_SCALE', doubleValueSpec: {minValue: 0.1, maxValue: 1}}],
    algorithm: 'RANDOM_SEARCH',
    measurementSelectionType: 'BEST_MEASUREMENT',
  };
  const report = 'import sys, hypertune\n' +
      'x = float([a for a in sys.argv[1:] if a.startswith("--x=")][0][4:])\n' +
      'hypertune.HyperTune().report_hyperparameter_tuning_metric("score", x)\n';
  const [study] = await client.createHyperparameterTuningJob({parent, hyperparameterTuningJob: {
    displayName: 'node-study', maxTrialCount: 2, parallelTrialCount: 1, studySpec,
    trialJobSpec: {workerPoolSpecs: [{machineSpec: {machineType: 'e2-standard-2'}, replicaCount: 1,
      containerSpec: {imageUri: o.image, command: ['python3', '-c', report]}}]},
  }});
  assert.match(study.name, nameRe('hyperparameterTuningJobs'));
  const sent = lastBody('POST', '/hyperparameterTuningJobs').studySpec;
  const sentEnums = {goal: sent.metrics[0].goal, algorithm: sent.algorithm, scaleType: sent.parameters[0].scaleType,
                     measurementSelectionType: sent.measurementSelectionType};
  assert.deepEqual(sentEnums, {
    goal: v1.StudySpec.MetricSpec.GoalType.MAXIMIZE, algorithm: v1.StudySpec.Algorithm.RANDOM_SEARCH,
    scaleType: v1.StudySpec.ParameterSpec.ScaleType.UNIT_LOG_SCALE,
    measurementSelectionType: v1.StudySpec.MeasurementSelectionType.BEST_MEASUREMENT,
  }, 'the client sends the study\'s enums as numbers');
  const readEnums = s => ({goal: s.studySpec.metrics[0].goal, algorithm: s.studySpec.algorithm,
                           scaleType: s.studySpec.parameters[0].scaleType,
                           measurementSelectionType: s.studySpec.measurementSelectionType});
  const names4 = {goal: 'MAXIMIZE', algorithm: 'RANDOM_SEARCH', scaleType: 'UNIT_LOG_SCALE',
                  measurementSelectionType: 'BEST_MEASUREMENT'};
  assert.deepEqual(readEnums(study), names4);
  step(`waiting for ${study.name}`);
  let s;
  for (const end = deadline(); ; await sleep(100)) {
    [s] = await client.getHyperparameterTuningJob({name: study.name});
    if (ENDED.includes(s.state)) break;
    assert.ok(Date.now() < end, `${study.name} still ${s.state} after ${o.timeout}s`);
  }
  assert.equal(s.state, 'JOB_STATE_SUCCEEDED', `the study ended ${s.state}: ${JSON.stringify(s.error)}`);
  assert.deepEqual(readEnums(s), names4);
  assert.equal(s.trials.length, 2);
  for (const t of s.trials) {
    assert.equal(t.state, 'SUCCEEDED', JSON.stringify(t));
    assert.equal(t.finalMeasurement.metrics[0].metricId, 'score');
    assert.ok(Math.abs(t.finalMeasurement.metrics[0].value - t.parameters[0].value.numberValue) < 1e-9,
              `trial ${t.id} reported x: ${JSON.stringify(t)}`);
  }
  // What the daemon itself answers (the client turns numbers into names
  // too): the same GET as plain JSON, outside the client.
  const rawAnswer = await fetch(`${o.url}/v1/${study.name}`, {headers: {authorization: `Bearer ${o.token}`}});
  assert.equal(rawAnswer.status, 200);
  const rawEnums = readEnums(await rawAnswer.json());
  assert.deepEqual(rawEnums, names4, 'the daemon answers enums by name');
  step('deleteHyperparameterTuningJob');
  const [studyOp] = await client.deleteHyperparameterTuningJob({name: study.name});
  assert.match(studyOp.name, nameRe('operations'));
  const [studyOpResult] = await studyOp.promise();
  assertEmpty(studyOpResult, 'the study deletion\'s operation');
  const studyGone = await refusal('getHyperparameterTuningJob of a deleted study',
                                  () => client.getHyperparameterTuningJob({name: study.name}));
  assert.equal(studyGone.code, 5, JSON.stringify(studyGone));
  const trialJobs = s.trials.map(t => t.customJob);
  for (const t of trialJobs) {
    assert.equal((await refusal(`getCustomJob of deleted trial job ${t}`, () => client.getCustomJob({name: t}))).code, 5);
  }
  summary.study = {name: study.name, createdEnums: readEnums(study), finalState: s.state, finalEnums: readEnums(s), rawEnums,
                   sentEnums, trials: s.trials.map(t => ({state: t.state, customJob: t.customJob,
                                                          score: t.finalMeasurement.metrics[0].value})),
                   deleteOperation: studyOp.name, getAfterDelete: studyGone};

  // Every call but the operations' carried the REST transport's enum encoding.
  const plain = auth.requests.filter(q => !q.path.includes('/operations/') &&
                                          !decodeURIComponent(q.query).includes('$alt=json;enum-encoding=int'));
  assert.deepEqual(plain, [], 'requests without enum-encoding=int');
  summary.requests = auth.requests.map(q => `${q.method} ${q.path}${q.query}`);
  process.stdout.write(JSON.stringify(summary) + '\n', () => process.exit(0));
}

main().catch(e => {
  process.stderr.write(`aiplatform_client.js FAILED: ${e instanceof assert.AssertionError ? 'mismatch: ' : ''}` +
                       `${e.message}${e.code !== undefined ? ` (code ${e.code})` : ''}\n${e.stack}\n`);
  process.exit(1);
});
