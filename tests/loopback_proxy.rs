//! A TCP proxy on loopback in front of the API server, for the tests of what the operator's
//! connections do: how many it opens ([`LoopbackProxy::accepted`]), and how it behaves when
//! they go silent ([`LoopbackProxy::cut`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::watch;

pub struct LoopbackProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    cut: watch::Sender<bool>,
}

impl LoopbackProxy {
    /// A proxy forwarding each connection it accepts to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let (cut, cut_rx) = watch::channel(false);
        let counter = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(forward(inbound, target, cut_rx.clone()));
            }
        });
        Self {
            addr,
            accepted,
            cut,
        }
    }

    /// How many connections clients have opened so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// From now on every connection, open or new, stays open and carries nothing: a network
    /// partition, not a refused connection.
    pub fn cut(&self) {
        let _ = self.cut.send(true);
    }
}

async fn forward(
    mut inbound: tokio::net::TcpStream,
    target: SocketAddr,
    mut cut: watch::Receiver<bool>,
) {
    let already_cut = *cut.borrow();
    if already_cut {
        return std::future::pending().await;
    }
    let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
        return;
    };
    let was_cut = tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => false,
        _ = cut.wait_for(|cut| *cut) => true,
    };
    if was_cut {
        // Both sockets stay open and carry nothing from now on.
        std::future::pending::<()>().await;
    }
}
