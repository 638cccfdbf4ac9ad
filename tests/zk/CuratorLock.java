/*
 * CuratorLock.java: Apache Curator's lock recipes driven line by line, for
 * tests/zk/test_curator.c. Compiled at test time by curator_interop.sh
 * against Debian's jars (libcurator-recipes-java).
 *
 *   java -cp ... CuratorLock HOST:PORT[,...]
 *
 * Prints READY once connected, then answers one line per command read from
 * stdin:
 *   mutex PATH MS   InterProcessMutex(PATH).acquire(MS ms)    -> GOT | BUSY
 *   read PATH MS    InterProcessReadWriteLock(PATH).readLock()  -> GOT | BUSY
 *   write PATH MS   InterProcessReadWriteLock(PATH).writeLock() -> GOT | BUSY
 *   sem PATH N MS   InterProcessSemaphoreV2(PATH, N).acquire(MS ms): one
 *                   lease                                     -> GOT | BUSY
 *   release         release the lock or lease last got (the
 *                   ones got before it stay held)             -> RELEASED
 * and Curator's LeaderLatch (one latch at a time):
 *   latch-join PATH ID  new LeaderLatch(PATH, ID).start()     -> JOINED
 *   latch-await MS      latch.await(MS ms)                 -> LEADER | FOLLOWER
 *   latch-leader        latch.getLeader(): the leader's id -> ID <id> | NONE
 *   latch-close         latch.close()                         -> CLOSED
 *   quit                                                      -> BYE
 * Errors are answered with a line starting with ERROR.
 */
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLock {
    /* What "release" gives back: a lock or a semaphore's lease. */
    interface Held {
        void release() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(
            args[0], 10000, 10000, new RetryOneTime(200));
        client.start();
        if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
            System.out.println("ERROR cannot connect to " + args[0]);
            System.exit(2);
        }
        System.out.println("READY");
        System.out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Deque<Held> held = new ArrayDeque<>();
        LeaderLatch latch = null;
        for (String line; (line = in.readLine()) != null;) {
            String[] w = line.trim().split(" ");
            try {
                switch (w[0]) {
                case "mutex":
                case "read":
                case "write": {
                    InterProcessLock lock;
                    if (w[0].equals("mutex"))
                        lock = new InterProcessMutex(client, w[1]);
                    else if (w[0].equals("read"))
                        lock = new InterProcessReadWriteLock(client, w[1]).readLock();
                    else
                        lock = new InterProcessReadWriteLock(client, w[1]).writeLock();
                    boolean got = lock.acquire(Long.parseLong(w[2]), TimeUnit.MILLISECONDS);
                    if (got)
                        held.push(lock::release);
                    System.out.println(got ? "GOT" : "BUSY");
                    break;
                }
                case "sem": {
                    InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(
                        client, w[1], Integer.parseInt(w[2]));
                    Lease lease = sem.acquire(Long.parseLong(w[3]), TimeUnit.MILLISECONDS);
                    if (lease != null)
                        held.push(lease::close);
                    System.out.println(lease != null ? "GOT" : "BUSY");
                    break;
                }
                case "release":
                    held.pop().release();
                    System.out.println("RELEASED");
                    break;
                case "latch-join":
                    latch = new LeaderLatch(client, w[1], w[2]);
                    latch.start();
                    System.out.println("JOINED");
                    break;
                case "latch-await":
                    System.out.println(latch.await(Long.parseLong(w[1]),
                                                   TimeUnit.MILLISECONDS)
                                           ? "LEADER" : "FOLLOWER");
                    break;
                case "latch-leader": {
                    Participant p = latch.getLeader();
                    System.out.println(p.isLeader() ? "ID " + p.getId()
                                                    : "NONE");
                    break;
                }
                case "latch-close":
                    latch.close();
                    latch = null;
                    System.out.println("CLOSED");
                    break;
                case "quit":
                    client.close();
                    System.out.println("BYE");
                    System.out.flush();
                    return;
                default:
                    System.out.println("ERROR unknown command " + w[0]);
                }
            } catch (Exception e) {
                System.out.println("ERROR " + e);
            }
            System.out.flush();
        }
        client.close();
    }
}
