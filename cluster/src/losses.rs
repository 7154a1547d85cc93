//! A failed query names the executors it lost and the stages they were running. Ballista 55
//! fails a job whose executors were lost with "all executors were lost and no executor
//! re-registered within 10s", or, when a task was reading a lost executor's shuffle file, with
//! the stage and a broken connection: neither says which executor went. The scheduler's gRPC
//! service is wrapped (`Noted`) to note, from the executors' own polls, each executor's address,
//! when it last asked for work, and the stages of each job it was given tasks of (a stage's
//! output stays on the executor that ran it, so a later stage needs it there); a failed job's
//! status then names those of its executors that are gone (their port refuses a connection, or
//! they stopped asking for longer than `GONE`) and the stages they ran.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpc;
use ballista_core::serde::protobuf::{
    CancelJobParams, CancelJobResult, CleanJobDataParams, CleanJobDataResult, CreateUpdateSessionParams,
    CreateUpdateSessionResult, ExecuteQueryParams, ExecuteQueryResult, ExecutorRegistration, ExecutorStoppedParams,
    ExecutorStoppedResult, GetJobMetricsParams, GetJobMetricsResult, GetJobStatusParams, GetJobStatusResult,
    HeartBeatParams, HeartBeatResult, PollWorkParams, PollWorkResult, RegisterExecutorParams, RegisterExecutorResult,
    RemoveSessionParams, RemoveSessionResult, UpdateTaskStatusParams, UpdateTaskStatusResult, job_status,
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
    /// Per job, the stages it was given tasks of; its latest `RECENT_JOBS` jobs, the newest
    /// last.
    ran: VecDeque<(String, BTreeSet<u32>)>,
}

/// The executors seen, by id.
#[derive(Debug, Default)]
struct Seen {
    executors: HashMap<String, Executor>,
}

impl Seen {
    /// Executor `id` asked for work (`registration`: who it is).
    fn asked(&mut self, registration: Option<&ExecutorRegistration>, id: &str) {
        let executor = self.executors.entry(id.to_string()).or_insert_with(|| Executor {
            address: id.to_string(),
            last_asked: Instant::now(),
            ran: VecDeque::new(),
        });
        executor.last_asked = Instant::now();
        if let Some(r) = registration
            && let Some(host) = &r.host
        {
            executor.address = format!("{host}:{}", r.port);
        }
    }

    /// Executor `id` was given a task of stage `stage` of job `job`.
    fn given(&mut self, id: &str, job: &str, stage: u32) {
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
/// lost and their stages said.
async fn told(seen: &Mutex<Seen>, status: &mut GetJobStatusResult) {
    let Some(job) = status.status.as_mut() else { return };
    let Some(job_status::Status::Failed(failed)) = job.status.as_mut() else { return };
    let holders = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).holders(&job.job_id, Instant::now());
    failed.error = said(&failed.error, &gone(holders).await);
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
impl<S: SchedulerGrpc> SchedulerGrpc for Noted<S> {
    type ExecuteQueryPushStream =
        std::pin::Pin<Box<dyn futures::Stream<Item = Result<GetJobStatusResult, Status>> + Send>>;

    async fn poll_work(&self, request: Request<PollWorkParams>) -> Result<Response<PollWorkResult>, Status> {
        let params = request.get_ref();
        let id = params.metadata.as_ref().map(|m| m.id.clone()).unwrap_or_default();
        self.seen().asked(params.metadata.as_ref(), &id);
        let answer = self.inner.poll_work(request).await?;
        let mut seen = self.seen();
        for task in &answer.get_ref().tasks {
            seen.given(&id, &task.job_id, task.stage_id);
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
        self.seen().asked(None, &request.get_ref().executor_id);
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
        let statuses = statuses.then(move |status| {
            let seen = seen.clone();
            async move {
                let mut status = status?;
                told(&seen, &mut status).await;
                Ok(status)
            }
        });
        Ok(Response::from_parts(metadata, Box::pin(statuses), extensions))
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
        seen.given("a", "j", 3);
        seen.given("a", "j", 3);
        seen.given("a", "j", 5);
        seen.given("b", "j", 3);
        seen.given("b", "k", 1);
        // An executor never seen asking is not known.
        seen.given("c", "j", 4);
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
            seen.given("b", &format!("later{k}"), 1);
        }
        assert!(seen.holders("k", now).is_empty());
        assert_eq!(seen.holders(&format!("later{}", RECENT_JOBS - 1), now).len(), 1);
    }
}
