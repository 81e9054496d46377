import { Route, Switch } from "wouter";
import { Layout } from "./components/Layout";
import { Overview } from "./pages/Overview";
import { Jobs } from "./pages/Jobs";
import { JobDetail } from "./pages/JobDetail";
import { BatchDetail } from "./pages/BatchDetail";
import { DeadLetters } from "./pages/DeadLetters";
import { Schedules } from "./pages/Schedules";
import { ScheduleForm } from "./pages/ScheduleForm";
import { Queues } from "./pages/Queues";
import { Workers } from "./pages/Workers";
import { Submit } from "./pages/Submit";
import { Audit } from "./pages/Audit";
import { Empty } from "./components/ui";

export function App() {
  return (
    <Layout>
      <Switch>
        <Route path="/" component={Overview} />
        <Route path="/jobs" component={Jobs} />
        <Route path="/jobs/:id">{(p) => <JobDetail key={p.id} id={p.id} />}</Route>
        <Route path="/batches/:id">{(p) => <BatchDetail key={p.id} id={p.id} />}</Route>
        <Route path="/dead">{() => <DeadLetters />}</Route>
        <Route path="/dead/:queue">{(p) => <DeadLetters queue={p.queue} />}</Route>
        <Route path="/schedules" component={Schedules} />
        <Route path="/schedules/new">{() => <ScheduleForm />}</Route>
        <Route path="/schedules/:id/edit">{(p) => <ScheduleForm key={p.id} id={p.id} />}</Route>
        <Route path="/queues" component={Queues} />
        <Route path="/workers" component={Workers} />
        <Route path="/submit" component={Submit} />
        <Route path="/audit" component={Audit} />
        <Route>
          <Empty>
            <h1>Not found</h1>
            <p>No page here. Use the navigation.</p>
          </Empty>
        </Route>
      </Switch>
    </Layout>
  );
}
