package market_spread.runtime;

import java.io.ByteArrayOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.Iterator;
import java.util.UUID;

import io.delta.storage.CloseableIterator;
import io.delta.storage.HDFSLogStore;
import io.delta.storage.LogStore;
import io.delta.storage.S3SingleDriverLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * Delta's log store for s3a://, s3:// and file:// tables that publishes a new log file (a commit
 * N.json) only if no writer has published that name, as delta-rs does.
 *
 * <p>Why: Delta's default stores check that N.json is absent and then write it: on S3 with a plain
 * PUT, on a local disk with a rename over the target, their lock holding only inside one JVM. The
 * stream commits through delta-rs and through Spark, and users write from Spark, so a Spark commit
 * landing in that window would silently erase a delta-rs commit of the same version. Here the
 * store itself refuses: a PUT with If-None-Match: * on S3, a hard link on a local disk. Either
 * failure is {@link FileAlreadyExistsException}, which Delta's commit takes as "version taken":
 * it checks the other commit for conflicts and tries the next version.
 *
 * <p>Reading, listing and the writes that replace on purpose (_last_checkpoint) stay Delta's own
 * stores': S3SingleDriverLogStore on S3, HDFSLogStore on a local disk.
 */
public class PutIfAbsentLogStore extends LogStore {

    /** hadoop-aws 3.4.2's createFile option: the PUT carries If-None-Match: *. */
    static final String CONDITIONAL = "fs.option.create.conditional.overwrite";

    private final LogStore s3;
    private final LogStore local;

    public PutIfAbsentLogStore(Configuration hadoopConf) {
        super(hadoopConf);
        s3 = new S3SingleDriverLogStore(hadoopConf);
        local = new HDFSLogStore(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        if (overwrite) {
            delegate(fs).write(path, actions, true, hadoopConf);
        } else if (isLocal(fs)) {
            linkIfAbsent(Paths.get(fs.makeQualified(path).toUri().getPath()), bytes(actions));
        } else {
            putIfAbsent(fs, fs.makeQualified(path), bytes(actions));
        }
    }

    /**
     * One PUT with If-None-Match: *, made when the stream closes. must(): a file system that cannot
     * honour the condition refuses the create, rather than overwriting.
     */
    static void putIfAbsent(FileSystem fs, Path path, byte[] bytes) throws IOException {
        try {
            FSDataOutputStreamBuilder<?, ?> create = fs.createFile(path).overwrite(false);
            create.must(CONDITIONAL, true);
            try (FSDataOutputStream out = create.build()) {
                out.write(bytes);
            }
        } catch (IOException failure) {
            // Most often 412: another writer published first. But S3A retries a PUT whose answer
            // was lost, and the retry of a PUT that had landed gets 412 too: the object then holds
            // our bytes, which no other commit can (Delta's commitInfo carries a random txnId).
            byte[] there;
            try (FSDataInputStream in = fs.open(path)) {
                there = in.readAllBytes();
            } catch (FileNotFoundException absent) {
                throw failure; // nothing published: the PUT itself failed
            } catch (IOException unknown) {
                failure.addSuppressed(unknown);
                throw failure;
            }
            if (Arrays.equals(there, bytes)) {
                return;
            }
            // Another writer's object: with the condition, ours can no longer land.
            throw taken(path.toString(), failure);
        }
    }

    /**
     * The bytes in a temporary file beside the target, on disk (fsync), then hard-linked to the
     * target's name, which fails if that name exists (delta-rs publishes the same way).
     */
    static void linkIfAbsent(java.nio.file.Path target, byte[] bytes) throws IOException {
        java.nio.file.Path dir = target.getParent();
        if (!Files.isDirectory(dir)) {
            throw new FileNotFoundException("No such file or directory: " + dir);
        }
        java.nio.file.Path temp = dir.resolve("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
        try {
            try (FileChannel out = FileChannel.open(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                ByteBuffer buffer = ByteBuffer.wrap(bytes);
                while (buffer.hasRemaining()) {
                    out.write(buffer);
                }
                out.force(true); // the bytes are on disk before a name publishes them
            }
            try {
                Files.createLink(target, temp);
            } catch (FileAlreadyExistsException exists) {
                throw taken(target.toString(), exists);
            }
            syncDirectory(dir);
        } finally {
            Files.deleteIfExists(temp);
        }
    }

    /**
     * The new name on disk too. Best effort: the commit is already visible, and reporting it failed
     * would send Delta to commit it again under the next version.
     */
    private static void syncDirectory(java.nio.file.Path dir) {
        try (FileChannel channel = FileChannel.open(dir, StandardOpenOption.READ)) {
            channel.force(true);
        } catch (IOException ignored) {
            // a file system that cannot sync a directory: the link stands as written
        }
    }

    private static FileAlreadyExistsException taken(String path, Exception cause) {
        FileAlreadyExistsException exists = new FileAlreadyExistsException(path);
        exists.initCause(cause);
        return exists;
    }

    /** Delta's own serialisation: each action on its line, UTF-8. */
    private static byte[] bytes(Iterator<String> actions) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        while (actions.hasNext()) {
            out.writeBytes((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
        }
        return out.toByteArray();
    }

    private static boolean isLocal(FileSystem fs) {
        return fs instanceof LocalFileSystem || fs instanceof RawLocalFileSystem;
    }

    private LogStore delegate(FileSystem fs) {
        return isLocal(fs) ? local : s3;
    }

    private LogStore delegate(Path path, Configuration hadoopConf) throws IOException {
        return delegate(path.getFileSystem(hadoopConf));
    }

    @Override
    public CloseableIterator<String> read(Path path, Configuration hadoopConf) throws IOException {
        return delegate(path, hadoopConf).read(path, hadoopConf);
    }

    @Override
    public Iterator<FileStatus> listFrom(Path path, Configuration hadoopConf) throws IOException {
        return delegate(path, hadoopConf).listFrom(path, hadoopConf);
    }

    @Override
    public Path resolvePathOnPhysicalStorage(Path path, Configuration hadoopConf) throws IOException {
        return delegate(path, hadoopConf).resolvePathOnPhysicalStorage(path, hadoopConf);
    }

    /**
     * As Delta's stores say: an object on S3 appears whole, a file on a local disk grows while it
     * is written (so Delta writes its checkpoints aside and renames them there).
     */
    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) throws IOException {
        return delegate(path, hadoopConf).isPartialWriteVisible(path, hadoopConf);
    }
}
