//! A failed query names the executors it lost and the stages they were running. Ballista 55
//! fails a job whose executors were lost with "all executors were lost and no executor
//! re-registered within 10s", or, when a task was reading a lost executor's shuffle file, with
//! the stage and a broken connection: neither says which executor went. The scheduler's gRPC
//! service is wrapped (`Noted`) to note, from the executors' own polls, each executor's address,
//! when it last asked for work, and the stages of each job it was given tasks of (a stage's
//! output stays on the executor that ran it, so a later stage needs it there); a failed job's
//! status then names those of its executors that are gone (their port refuses a connection, or
//! they stopped asking for longer than `GONE`) and the stages they ran.
//!
//! Ballista 55 also leaves a job running, some times, after it gave up an executor that held
//! its stages' outputs: it rolls the stages back, runs some of them again, and then gives no
//! task out while the client waits. So the wrapper also notes each job's tasks, given and
//! ended; a job that has not moved for `STUCK` while none of its tasks runs on a live executor,
//! though an executor with a core free was given nothing (so it waits for no core), is stuck,
//! and its status (polled, or pushed: the push is woken every second to look) says
//! it failed, naming what was lost, and the job is cancelled.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpc;
use ballista_core::serde::protobuf::{
    CancelJobParams, CancelJobResult, CleanJobDataParams, CleanJobDataResult, CreateUpdateSessionParams,
    CreateUpdateSessionResult, ExecuteQueryParams, ExecuteQueryResult, ExecutorRegistration, ExecutorStoppedParams,
    ExecutorStoppedResult, FailedJob, GetJobMetricsParams, GetJobMetricsResult, GetJobStatusParams, GetJobStatusResult,
    HeartBeatParams, HeartBeatResult, PollWorkParams, PollWorkResult, RegisterExecutorParams, RegisterExecutorResult,
    RemoveSessionParams, RemoveSessionResult, TaskStatus, UpdateTaskStatusParams, UpdateTaskStatusResult, job_status,
    task_status,
};
use tonic::{Request, Response, Status};

/// An executor that has not asked for work for this long is taken as gone. A live one asks
/// several times a second when idle, and every 5 s when all its cores are busy.
const GONE: Duration = Duration::from_secs(8);

/// How long an executor's port is given to accept a connection before it is taken as gone.
const ANSWER: Duration = Duration::from_millis(500);

/// The jobs an executor's stages are kept for, its latest: a job fails while it runs or
/// just after, and a scheduler serves jobs for as long as it runs.
const RECENT_JOBS: usize = 64;

/// What the polls told of one executor.
#[derive(Debug)]
struct Executor {
    address: String,
    last_asked: Instant,
    /// When it last asked with a core free and was given nothing (the scheduler had no task
    /// ready for it, of any job).
    last_unanswered: Option<Instant>,
    /// Per job, the stages it was given tasks of; its latest `RECENT_JOBS` jobs, the newest
    /// last.
    ran: VecDeque<(String, BTreeSet<u32>)>,
}

/// A job that has not moved for this long while none of its tasks runs on a live executor is
/// stuck: a live executor asks for work several times a second, and is given the next task of
/// a job as soon as one is ready; Ballista gives a lost executor up after 10 s without a
/// heartbeat and then runs its tasks again, which this leaves time for.
const STUCK: Duration = Duration::from_secs(20);

/// A job without a task running that has not moved for this long is no longer followed.
const FORGOTTEN: Duration = Duration::from_secs(600);

/// What the polls told of one job's tasks: when one was last given or ended, and those given
/// and not ended, each with the executor's id.
#[derive(Debug)]
struct JobTasks {
    moved: Instant,
    running: HashMap<(u32, u32), String>,
}

/// A job that has not moved: the executors of its running tasks (as `Seen::holders` gives
/// them) and those tasks' stages.
#[derive(Debug)]
struct Still {
    running: Vec<(String, BTreeSet<u32>, Duration)>,
    stages: BTreeSet<u32>,
}

/// The executors seen, by id, and the jobs running, by id.
#[derive(Debug, Default)]
struct Seen {
    executors: HashMap<String, Executor>,
    jobs: HashMap<String, JobTasks>,
}

impl Seen {
    /// Executor `id` asked for work (`registration`: who it is).
    fn asked(&mut self, registration: Option<&ExecutorRegistration>, id: &str) {
        let executor = self.executors.entry(id.to_string()).or_insert_with(|| Executor {
            address: id.to_string(),
            last_asked: Instant::now(),
            last_unanswered: None,
            ran: VecDeque::new(),
        });
        executor.last_asked = Instant::now();
        if let Some(r) = registration
            && let Some(host) = &r.host
        {
            executor.address = format!("{host}:{}", r.port);
        }
    }

    /// Executor `id` was given task `task` of stage `stage` of job `job`.
    fn given(&mut self, id: &str, job: &str, stage: u32, task: u32) {
        if !self.jobs.contains_key(job) {
            // A job whose client went away is never asked of again: those without a task
            // running that have not moved for long are no longer followed.
            self.jobs.retain(|_, t| !t.running.is_empty() || t.moved.elapsed() < FORGOTTEN);
        }
        let tasks = self
            .jobs
            .entry(job.to_string())
            .or_insert_with(|| JobTasks { moved: Instant::now(), running: HashMap::new() });
        tasks.moved = Instant::now();
        tasks.running.insert((stage, task), id.to_string());
        let Some(executor) = self.executors.get_mut(id) else { return };
        match executor.ran.iter_mut().rev().find(|(j, _)| j == job) {
            Some((_, stages)) => {
                stages.insert(stage);
            }
            None => {
                if executor.ran.len() == RECENT_JOBS {
                    executor.ran.pop_front();
                }
                executor.ran.push_back((job.to_string(), BTreeSet::from([stage])));
            }
        }
    }

    /// Tasks ended (or still running, which moves nothing), as the executors report them.
    fn reported(&mut self, statuses: &[TaskStatus]) {
        for status in statuses {
            let ended =
                matches!(status.status, Some(task_status::Status::Successful(_) | task_status::Status::Failed(_)));
            if let Some(tasks) = self.jobs.get_mut(&status.job_id)
                && ended
            {
                tasks.running.remove(&(status.stage_id, status.task_id));
                tasks.moved = Instant::now();
            }
        }
    }

    /// Job `job` has ended: its tasks are no longer followed.
    fn ended(&mut self, job: &str) {
        self.jobs.remove(job);
    }

    /// Executor `id` asked with a core free and was given nothing.
    fn unanswered(&mut self, id: &str) {
        if let Some(executor) = self.executors.get_mut(id) {
            executor.last_unanswered = Some(Instant::now());
        }
    }

    /// When `job` has not moved for `STUCK` by `now`, and an executor with a core free was given
    /// nothing since (the job waits for no core): the executors of its running tasks, as
    /// `holders` gives them (none: it runs no task); None while it moves or waits for a core,
    /// or when it is not known.
    fn still(&self, job: &str, now: Instant) -> Option<Still> {
        let tasks = self.jobs.get(job)?;
        if now.saturating_duration_since(tasks.moved) < STUCK {
            return None;
        }
        let idle = self.executors.values().filter_map(|e| e.last_unanswered).any(|at| at > tasks.moved + STUCK / 2);
        if !idle {
            return None;
        }
        let running: BTreeSet<&String> = tasks.running.values().collect();
        let holders = self.holders(job, now);
        let ids: HashMap<&String, &String> = self.executors.iter().map(|(id, e)| (&e.address, id)).collect();
        let on = holders.into_iter().filter(|(address, ..)| ids.get(address).is_some_and(|id| running.contains(id)));
        Some(Still { running: on.collect(), stages: tasks.running.keys().map(|(stage, _)| *stage).collect() })
    }

    /// The executors given tasks of `job`, each with the stages of those tasks and how long ago
    /// it last asked for work; in order of address.
    fn holders(&self, job: &str, now: Instant) -> Vec<(String, BTreeSet<u32>, Duration)> {
        let mut holders: Vec<(String, BTreeSet<u32>, Duration)> = self
            .executors
            .values()
            .filter_map(|e| {
                let (_, stages) = e.ran.iter().find(|(j, _)| j == job)?;
                Some((e.address.clone(), stages.clone(), now.saturating_duration_since(e.last_asked)))
            })
            .collect();
        holders.sort();
        holders
    }
}

/// Of `holders` (`Seen::holders`), those gone: silent for longer than `GONE`, or whose port
/// refuses a connection (a process killed closes its ports at once); their ports are tried
/// all at once.
async fn gone(holders: Vec<(String, BTreeSet<u32>, Duration)>) -> Vec<(String, BTreeSet<u32>)> {
    let tried = holders.into_iter().map(|(address, stages, silent)| async move {
        let connect = tokio::net::TcpStream::connect(address.as_str());
        let answers = matches!(tokio::time::timeout(ANSWER, connect).await, Ok(Ok(_)));
        (silent > GONE || !answers).then_some((address, stages))
    });
    futures::future::join_all(tried).await.into_iter().flatten().collect()
}

/// `message` (a failed job's) with the executors it lost and their stages said.
fn said(message: &str, lost: &[(String, BTreeSet<u32>)]) -> String {
    if lost.is_empty() {
        return message.to_string();
    }
    let named: Vec<String> = lost
        .iter()
        .map(|(address, stages)| {
            let stages: Vec<String> = stages.iter().map(u32::to_string).collect();
            let s = if stages.len() == 1 { "" } else { "s" };
            format!("the executor at {address} (stage{s} {})", stages.join(", "))
        })
        .collect();
    format!("{message}; lost while it ran: {}", named.join(", "))
}

/// `status` (a job's, as the scheduler answers it) with, when the job failed, the executors it
/// lost and their stages said; a job that has ended is no longer followed.
async fn told(seen: &Mutex<Seen>, status: &mut GetJobStatusResult) {
    let Some(job) = status.status.as_mut() else { return };
    let lock = || seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match job.status.as_mut() {
        Some(job_status::Status::Failed(failed)) => {
            let holders = lock().holders(&job.job_id, Instant::now());
            failed.error = said(&failed.error, &gone(holders).await);
            lock().ended(&job.job_id);
        }
        Some(job_status::Status::Successful(_)) => lock().ended(&job.job_id),
        _ => {}
    }
}

/// When job `job` (running or queued) is stuck: not moved for `STUCK` and none of its tasks on
/// a live executor; the status saying it failed, naming the executors it lost and their stages.
async fn stuck(seen: &Mutex<Seen>, job: &str) -> Option<GetJobStatusResult> {
    let lock = || seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (still, now) = {
        let now = Instant::now();
        (lock().still(job, now)?, now)
    };
    let live = still.running.len() - gone(still.running.clone()).await.len();
    if live > 0 {
        return None;
    }
    let holders = lock().holders(job, now);
    let lost = gone(holders).await;
    // The stages it waits on: of its tasks given and not ended, else those the lost held.
    let mut stages = still.stages;
    if stages.is_empty() {
        stages = lost.iter().flat_map(|(_, s)| s.iter().copied()).collect();
    }
    let stages: Vec<String> = stages.iter().map(u32::to_string).collect();
    let plural = if stages.len() == 1 { "" } else { "s" };
    let error = said(
        &format!(
            "Job {job} failed due to stage{plural} {} making no progress for {} s: no live executor runs a task of it, and none was given one (Ballista gave no task out again after it lost an executor)",
            stages.join(", "),
            STUCK.as_secs()
        ),
        &lost,
    );
    lock().ended(job);
    let failed = FailedJob { error, ..Default::default() };
    let status = ballista_core::serde::protobuf::JobStatus {
        job_id: job.to_string(),
        status: Some(job_status::Status::Failed(failed)),
        ..Default::default()
    };
    Some(GetJobStatusResult { status: Some(status), ..Default::default() })
}

/// A job's pushed statuses, with the ticks that look whether it is stuck.
struct Push<St> {
    statuses: St,
    job: Option<String>,
    over: bool,
    ticks: tokio::time::Interval,
    seen: Arc<Mutex<Seen>>,
}

/// The scheduler's gRPC service, noting what the executors' polls tell.
pub struct Noted<S> {
    inner: S,
    seen: Arc<Mutex<Seen>>,
}

impl<S> std::fmt::Debug for Noted<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Noted").field("seen", &self.seen).finish_non_exhaustive()
    }
}

impl<S> Noted<S> {
    pub fn new(inner: S) -> Noted<S> {
        Noted { inner, seen: Arc::new(Mutex::new(Seen::default())) }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[tonic::async_trait]
impl<S: SchedulerGrpc + Clone> SchedulerGrpc for Noted<S> {
    type ExecuteQueryPushStream =
        std::pin::Pin<Box<dyn futures::Stream<Item = Result<GetJobStatusResult, Status>> + Send>>;

    async fn poll_work(&self, request: Request<PollWorkParams>) -> Result<Response<PollWorkResult>, Status> {
        let params = request.get_ref();
        let id = params.metadata.as_ref().map(|m| m.id.clone()).unwrap_or_default();
        {
            let mut seen = self.seen();
            seen.asked(params.metadata.as_ref(), &id);
            seen.reported(&params.task_status);
        }
        let free = params.num_free_vcores > 0;
        let answer = self.inner.poll_work(request).await?;
        let mut seen = self.seen();
        for task in &answer.get_ref().tasks {
            seen.given(&id, &task.job_id, task.stage_id, task.task_id);
        }
        if free && answer.get_ref().tasks.is_empty() {
            seen.unanswered(&id);
        }
        Ok(answer)
    }

    async fn register_executor(
        &self,
        request: Request<RegisterExecutorParams>,
    ) -> Result<Response<RegisterExecutorResult>, Status> {
        if let Some(m) = request.get_ref().metadata.as_ref() {
            self.seen().asked(Some(m), &m.id);
        }
        self.inner.register_executor(request).await
    }

    async fn heart_beat_from_executor(
        &self,
        request: Request<HeartBeatParams>,
    ) -> Result<Response<HeartBeatResult>, Status> {
        let params = request.get_ref();
        self.seen().asked(params.metadata.as_ref(), &params.executor_id);
        self.inner.heart_beat_from_executor(request).await
    }

    async fn update_task_status(
        &self,
        request: Request<UpdateTaskStatusParams>,
    ) -> Result<Response<UpdateTaskStatusResult>, Status> {
        {
            let mut seen = self.seen();
            seen.asked(None, &request.get_ref().executor_id);
            seen.reported(&request.get_ref().task_status);
        }
        self.inner.update_task_status(request).await
    }

    async fn create_update_session(
        &self,
        request: Request<CreateUpdateSessionParams>,
    ) -> Result<Response<CreateUpdateSessionResult>, Status> {
        self.inner.create_update_session(request).await
    }

    async fn remove_session(
        &self,
        request: Request<RemoveSessionParams>,
    ) -> Result<Response<RemoveSessionResult>, Status> {
        self.inner.remove_session(request).await
    }

    /// The job's statuses as it runs, the failed one naming the executors it lost.
    async fn execute_query_push(
        &self,
        request: Request<ExecuteQueryParams>,
    ) -> Result<Response<Self::ExecuteQueryPushStream>, Status> {
        use futures::StreamExt;
        // The answer's metadata kept: the client checks the scheduler's version there.
        let (metadata, statuses, extensions) = self.inner.execute_query_push(request).await?.into_parts();
        let seen = self.seen.clone();
        // The job's statuses, and a look every second whether it is stuck (its last status
        // may be its last): the first status says which job it is; a failed one ends the push.
        let statuses = Box::pin(statuses);
        let push =
            Push { statuses, job: None, over: false, ticks: tokio::time::interval(Duration::from_secs(1)), seen };
        let inner = self.inner.clone();
        let pushed = futures::stream::unfold(push, move |mut push| {
            let inner = inner.clone();
            async move {
                loop {
                    if push.over {
                        return None;
                    }
                    tokio::select! {
                        next = push.statuses.next() => match next {
                            Some(Ok(mut status)) => {
                                if let Some(s) = &status.status {
                                    push.job.get_or_insert_with(|| s.job_id.clone());
                                    push.over = matches!(s.status, Some(job_status::Status::Failed(_) | job_status::Status::Successful(_)));
                                }
                                told(&push.seen, &mut status).await;
                                return Some((Ok(status), push));
                            }
                            Some(Err(e)) => {
                                push.over = true;
                                return Some((Err(e), push));
                            }
                            None => return None,
                        },
                        _ = push.ticks.tick() => {
                            if let Some(job) = push.job.clone()
                                && let Some(failed) = stuck(&push.seen, &job).await
                            {
                                push.over = true;
                                let _ = inner.cancel_job(Request::new(CancelJobParams { job_id: job })).await;
                                return Some((Ok(failed), push));
                            }
                        }
                    }
                }
            }
        });
        Ok(Response::from_parts(metadata, Box::pin(pushed), extensions))
    }

    async fn execute_query(
        &self,
        request: Request<ExecuteQueryParams>,
    ) -> Result<Response<ExecuteQueryResult>, Status> {
        self.inner.execute_query(request).await
    }

    /// A failed job's status names the executors it lost and their stages.
    async fn get_job_status(
        &self,
        request: Request<GetJobStatusParams>,
    ) -> Result<Response<GetJobStatusResult>, Status> {
        let mut answer = self.inner.get_job_status(request).await?;
        let running = answer
            .get_ref()
            .status
            .as_ref()
            .filter(|s| matches!(s.status, Some(job_status::Status::Running(_) | job_status::Status::Queued(_))));
        if let Some(job) = running.map(|s| s.job_id.clone())
            && let Some(failed) = stuck(&self.seen, &job).await
        {
            let _ = self.inner.cancel_job(Request::new(CancelJobParams { job_id: job })).await;
            return Ok(Response::new(failed));
        }
        told(&self.seen, answer.get_mut()).await;
        Ok(answer)
    }

    async fn get_job_metrics(
        &self,
        request: Request<GetJobMetricsParams>,
    ) -> Result<Response<GetJobMetricsResult>, Status> {
        self.inner.get_job_metrics(request).await
    }

    async fn executor_stopped(
        &self,
        request: Request<ExecutorStoppedParams>,
    ) -> Result<Response<ExecutorStoppedResult>, Status> {
        self.inner.executor_stopped(request).await
    }

    async fn cancel_job(&self, request: Request<CancelJobParams>) -> Result<Response<CancelJobResult>, Status> {
        self.inner.cancel_job(request).await
    }

    async fn clean_job_data(
        &self,
        request: Request<CleanJobDataParams>,
    ) -> Result<Response<CleanJobDataResult>, Status> {
        self.inner.clean_job_data(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registration(id: &str, port: u32) -> ExecutorRegistration {
        ExecutorRegistration { id: id.to_string(), host: Some("127.0.0.1".to_string()), port, ..Default::default() }
    }

    #[tokio::test]
    async fn the_executors_gone_are_named_with_the_stages_they_held() {
        let mut seen = Seen::default();
        // a's port is one nobody listens on; b's answers.
        let listening = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = u32::from(listening.local_addr().unwrap().port());
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            u32::from(l.local_addr().unwrap().port())
        };
        seen.asked(Some(&registration("a", closed)), "a");
        seen.asked(Some(&registration("b", open)), "b");
        seen.given("a", "j", 3, 0);
        seen.given("a", "j", 3, 1);
        seen.given("a", "j", 5, 0);
        seen.given("b", "j", 3, 2);
        seen.given("b", "k", 1, 0);
        // An executor never seen asking is not known.
        seen.given("c", "j", 4, 0);
        let now = Instant::now();
        let holders = seen.holders("j", now);
        assert_eq!(holders.len(), 2, "{holders:?}");
        let a = format!("127.0.0.1:{closed}");
        assert_eq!(gone(holders).await, vec![(a.clone(), BTreeSet::from([3, 5]))]);
        // b answers, and asked just now; silent for longer than GONE, it is gone too.
        assert!(gone(seen.holders("k", now)).await.is_empty());
        let later = now + GONE + Duration::from_secs(1);
        assert_eq!(gone(seen.holders("k", later)).await.len(), 1);
        let text = said("Job j failed: all executors were lost", &[(a.clone(), BTreeSet::from([3, 5]))]);
        assert_eq!(
            text,
            format!("Job j failed: all executors were lost; lost while it ran: the executor at {a} (stages 3, 5)")
        );
        assert_eq!(said("failed", &[]), "failed");
        // Only an executor's latest jobs are kept.
        for k in 0..RECENT_JOBS {
            seen.given("b", &format!("later{k}"), 1, 0);
        }
        assert!(seen.holders("k", now).is_empty());
        assert_eq!(seen.holders(&format!("later{}", RECENT_JOBS - 1), now).len(), 1);
    }

    #[test]
    fn a_job_is_still_once_no_task_moved_for_a_while() {
        let mut seen = Seen::default();
        seen.asked(Some(&registration("a", 1)), "a");
        seen.asked(Some(&registration("b", 2)), "b");
        seen.given("a", "j", 1, 0);
        seen.given("b", "j", 2, 0);
        let now = Instant::now();
        assert!(seen.still("j", now).is_none(), "it just moved");
        assert!(seen.still("unknown", now + STUCK).is_none());
        // No executor with a core free was given nothing: the job may wait for a core.
        let later = now + STUCK + Duration::from_secs(1);
        assert!(seen.still("j", later).is_none());
        // Both tasks running, and an executor given nothing since: still, with both executors
        // to look at.
        seen.executors.get_mut("a").unwrap().last_unanswered = Some(later);
        let still = seen.still("j", later).unwrap();
        assert_eq!((still.running.len(), still.stages), (2, BTreeSet::from([1, 2])));
        // b's task ended: only a's is running.
        let ended = TaskStatus {
            task_id: 0,
            job_id: "j".to_string(),
            stage_id: 2,
            status: Some(task_status::Status::Successful(Default::default())),
            ..Default::default()
        };
        seen.reported(&[ended]);
        assert!(seen.still("j", Instant::now()).is_none(), "a task ended just now");
        let later = Instant::now() + STUCK + Duration::from_secs(1);
        seen.executors.get_mut("a").unwrap().last_unanswered = Some(later);
        let still = seen.still("j", later).unwrap();
        assert_eq!(still.running.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["127.0.0.1:1"]);
        assert_eq!(still.stages, BTreeSet::from([1]));
        // A job that ended is no longer followed.
        seen.ended("j");
        assert!(seen.still("j", later).is_none());
    }
}
