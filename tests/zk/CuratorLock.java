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
 *   release         release the lock last got                 -> RELEASED
 *   quit                                                      -> BYE
 * Errors are answered with a line starting with ERROR.
 */
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLock {
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
        InterProcessLock held = null;
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
                        held = lock;
                    System.out.println(got ? "GOT" : "BUSY");
                    break;
                }
                case "release":
                    held.release();
                    held = null;
                    System.out.println("RELEASED");
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
